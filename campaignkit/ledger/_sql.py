"""The store of the SQL ledgers, in SQL that SQLite and PostgreSQL both run.

A dialect (:mod:`._sqlite`, :mod:`._postgres`) supplies only a connection:
:meth:`SqlStore.connection` yields a :class:`~._schema.Transaction` whose
statements use ``?`` placeholders (the PostgreSQL driver numbers them) and
whose ``any_of`` spells "column is one of these values" in its dialect. Its
transactions' primitives are :class:`~._sql_tx.SqlTx`'s.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from operator import itemgetter
from typing import Final

from .._report import SuppressedUser
from ._build import Request, requests_of, suppressed_of
from ._records import ACCEPTED, PLANNED, STATES, Record, positions_of
from ._rekey import create_schema
from ._schema import Transaction, in_list
from ._sql_held import (
    CLAIMED_RECORD,
    CLAIMED_ROWS,
    RECORD,
    UNPLANNED,
    held_as,
    held_joins,
    record_columns,
)
from ._sql_tx import SUPPRESSION_COLUMNS, SqlTx
from ._suppression import Suppression

_SETTLED_APART: Final = [state for state in STATES if state not in (PLANNED, ACCEPTED)]
"""The states of a report's recipients read one by one (the accepted go by claim)."""


class SqlStore(abc.ABC):
    """The store of a ledger in an SQL database; a dialect gives the connection."""

    def __init__(self) -> None:
        self._new_runs: set[str] = set()
        """The runs whose last plan here met none of its recipients in the
        run: the next one inserts without looking (see :meth:`SqlTx.upsert`)."""

    @abc.abstractmethod
    async def _connect(self) -> None: ...

    @abc.abstractmethod
    async def _lock_schema(self, tx: Transaction) -> None:
        """Serialise schema creation between processes."""

    @abc.abstractmethod
    def connection(self, *, durable: bool = True) -> AbstractAsyncContextManager[Transaction]:
        """One transaction of the connection: committed on success (durably,
        or without waiting for the disk: see :meth:`Store.transaction`),
        rolled back on error."""

    @abc.abstractmethod
    async def aclose(self) -> None: ...

    async def open(self) -> bool:
        """Connect, create the tables if missing (re-key an older ledger's
        phones); whether the ledger is new.

        ``CREATE INDEX IF NOT EXISTS`` locks its table even when the index
        exists: against other processes' claims, it may deadlock (the ledger
        runs it again).
        """
        await self._connect()
        async with self.connection() as tx:
            await self._lock_schema(tx)
            created = await create_schema(tx)
            return created

    @asynccontextmanager
    async def transaction(self, *, durable: bool = True) -> AsyncIterator[SqlTx]:
        async with self.connection(durable=durable) as tx:
            yield SqlTx(tx, new_runs=self._new_runs)

    async def records(
        self, run: str, states: Sequence[str], page_size: int
    ) -> AsyncIterator[Record]:
        position, phone = -1, ""
        while True:
            async with self.connection() as tx:
                condition, args = tx.any_of(held_as("r", "state"), list(states))
                rows = await tx.fetch(
                    f"SELECT {record_columns('r')} FROM campaignkit_recipients r"
                    f"{held_joins('r')} WHERE r.run = ? AND (r.position > ?"
                    f" OR (r.position = ? AND r.phone > ?)) AND {condition}"
                    " ORDER BY r.position, r.phone LIMIT ?",
                    *(run, position, position, phone),
                    *args,
                    page_size,
                )
            for row in rows:
                yield Record(*row)
            if len(rows) < page_size:
                return
            phone, position = rows[-1][0], rows[-1][1]

    async def report_groups(
        self, run: str, acks: Mapping[str, str]
    ) -> tuple[list[Request], list[SuppressedUser], float | None]:
        # Whole, not page by page (each page of :meth:`records` sorts the run
        # again: no index of positions, it would cost every plan). The
        # accepted, most of a run, grouped by claim in SQL, their positions
        # joined: a report lists no accepted user (see ._build.chunk_of), and
        # a row each was most of a report's time (benchmarks, row 17).
        async with self.connection() as tx:
            # Through the run's claims and chunks (their indexes), never a
            # join of each recipient: PostgreSQL plans one for a run just
            # written (no statistics yet) as a loop over every claim a row.
            # The rows not planned through their index; the planned ones
            # through the chunks no claim holds (as ._sql_held.held_joins has
            # it): every plan files its chunk's row.
            rows = await tx.fetch(
                f"SELECT {RECORD}, updated{UNPLANNED.format(states=in_list(_SETTLED_APART))}"
                f" UNION ALL SELECT {RECORD}, updated FROM campaignkit_recipients r"
                " WHERE r.run = ? AND r.state = 'planned' AND r.chunk IN (SELECT k.chunk"
                " FROM campaignkit_chunks k WHERE k.run = ? AND k.chunk NOT IN (SELECT c.chunk"
                " FROM campaignkit_claims c WHERE c.run = ? AND c.state <> 'planned'))"
                f" UNION ALL SELECT {CLAIMED_RECORD}, c.updated{CLAIMED_ROWS}"
                f" AND c.state NOT IN ('planned', '{ACCEPTED}') ORDER BY 2, 1",
                *(run, run, run, run, run),
            )
            # Their positions as each claim's row keeps them (schema 4), or
            # joined from its recipients (a claim made before, schema 2's rows).
            accepted = await tx.fetch(
                "SELECT c.claim, c.detail, c.positions, c.updated FROM campaignkit_claims c"
                " WHERE c.run = ? AND c.state = ? AND c.positions IS NOT NULL"
                f" UNION ALL SELECT c.claim, c.detail, {tx.spaced('CAST(r.position AS TEXT)')},"
                f" MAX(c.updated){CLAIMED_ROWS} AND c.state = ? AND c.positions IS NULL"
                f" GROUP BY c.claim, c.detail UNION ALL SELECT claim, detail,"
                f" {tx.spaced('CAST(position AS TEXT)')}, MAX(updated)"
                " FROM campaignkit_recipients WHERE run = ? AND state <> 'planned'"
                " AND state = ? GROUP BY claim, detail",
                *(run, ACCEPTED, run, ACCEPTED, run, ACCEPTED),
            )
        records = [Record(*row[:7]) for row in rows]
        requests = requests_of(records, acks)
        updates = [float(row[7]) for row in rows] + [float(row[3]) for row in accepted]
        # By claim, as requests_of groups them: the detail of the first.
        by_claim: dict[str | None, list[tuple[int, str | None, list[int]]]] = {}
        for claim, detail, joined, _ in accepted:
            positions = positions_of(joined)
            by_claim.setdefault(claim, []).append((min(positions), detail, positions))
        for claim, groups in by_claim.items():
            first = min(groups, key=itemgetter(0))
            positions = sorted(position for _, _, group in groups for position in group)
            ack = acks.get(claim or "")
            requests.append(Request(claim, ACCEPTED, positions, None, first[1], ack))
        return requests, suppressed_of(records), max(updates, default=None)

    async def suppressions(self, page_size: int) -> AsyncIterator[Suppression]:
        after = ""
        while True:
            async with self.connection() as tx:
                rows = await tx.fetch(
                    f"SELECT {SUPPRESSION_COLUMNS} FROM campaignkit_suppressions WHERE phone > ?"
                    " ORDER BY phone LIMIT ?",
                    after,
                    page_size,
                )
            for row in rows:
                yield Suppression(*row)
            if len(rows) < page_size:
                return
            after = rows[-1][0]

    @asynccontextmanager
    async def rehearsal(self) -> AsyncIterator[SqlStore]:
        # One transaction of this store's, rolled back at the end: it holds
        # the ledger's write lock meanwhile (SQLite's file; PostgreSQL's rows).
        try:
            async with self.connection() as tx:
                yield _Rehearsal(tx)
                raise _Undone
        except _Undone:
            pass


class _Undone(Exception):
    """Ends a rehearsal's transaction: rolled back, as every failed one is."""


class _Rehearsal(SqlStore):
    """A store over one open transaction that its owner rolls back: each of
    its transactions is that one's, in turn."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx
        self._turn = asyncio.Lock()

    async def _connect(self) -> None:
        """Nothing to do: the transaction is open."""

    async def _lock_schema(self, tx: Transaction) -> None:
        """Nothing to do: the schema is the ledger's."""

    @asynccontextmanager
    async def connection(self, *, durable: bool = True) -> AsyncIterator[Transaction]:
        async with self._turn:
            yield self._tx

    @asynccontextmanager
    async def transaction(self, *, durable: bool = True) -> AsyncIterator[SqlTx]:
        async with self.connection() as tx:
            yield SqlTx(tx, ends=False)

    async def aclose(self) -> None:
        """Nothing to do: the transaction is its owner's."""
