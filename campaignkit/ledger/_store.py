"""The ledger's logic, written once in SQL that SQLite and PostgreSQL both run.

A store subclass supplies only a connection: :meth:`SqlLedger._transaction`
yields a :class:`Transaction` whose statements use ``?`` placeholders (the
PostgreSQL driver numbers them) and whose ``any_of`` spells "column is one of
these values" in its dialect.
"""

from __future__ import annotations

import abc
import time
import uuid
from collections.abc import Mapping, Sequence
from operator import attrgetter

from ..errors import LedgerError
from ._identity import check_identity, stored_identity
from ._outcome_store import OutcomeStore
from ._producer import ProducerBookkeeping
from ._protocol import Ledger
from ._reads import LedgerReads
from ._records import (
    ACCEPTED,
    AMBIGUOUS,
    DEFERRED,
    PLANNED,
    REJECTED,
    SUPPRESSED,
    Claim,
    Recipient,
    Recipients,
    Record,
    RunInfo,
)
from ._run_stops import RunStops
from ._schema import BATCH, Transaction, create_schema, retried
from ._sending_sql import SendingRulesStore
from ._suppression import Suppression
from ._suppression_store import SuppressionStore


def _filed(entry: Suppression | None, deferral: str | None) -> tuple[str, str | None]:
    """The state and detail a recipient is filed with: suppressed (with the
    reason its number is on the list), deferred (with why), or planned."""
    if entry is not None:
        return SUPPRESSED, entry.reason
    return (PLANNED, None) if deferral is None else (DEFERRED, deferral)


class SqlLedger(
    OutcomeStore,
    ProducerBookkeeping,
    RunStops,
    LedgerReads,
    SendingRulesStore,
    SuppressionStore,
    Ledger,
):
    """Every ledger operation over a :class:`Transaction`; see :class:`Ledger`."""

    reconnect_timeout: float = 60.0
    """Seconds an operation keeps reconnecting (jittered backoff up to 5 s, one
    warning of the ``campaignkit.ledger`` logger per attempt) after the
    connection to a ledger server is lost, before it raises."""

    @abc.abstractmethod
    async def _connect(self) -> None: ...

    @retried
    async def open(self) -> None:
        """Connect and create the schema on first use (unless the store was
        made with ``create=False``: then a missing ledger is
        :class:`~campaignkit.ledger.LedgerNotFound`); read the ledger's identity. Idempotent.

        Run again if it deadlocks: ``CREATE INDEX IF NOT EXISTS`` locks its
        table even when the index exists, against other processes' claims.
        """
        await self._connect()
        async with self._transaction() as tx:
            await self._lock_schema(tx)
            created = await create_schema(tx)
            self._identity = await stored_identity(tx)
        self.is_new = self.is_new or created

    @abc.abstractmethod
    async def _lock_schema(self, tx: Transaction) -> None:
        """Serialise schema creation between processes."""

    # -- runs

    @retried
    async def start_run(self, run: str, poll: str, *, input_pass: str | None = None) -> RunInfo:
        """The run, created for ``poll`` if new; a run of another poll is refused.

        ``input_pass`` names a new reading of the run's input (a producer, a
        ``send_bulk`` call): the run is not done until it finishes, and the
        report counts the inputs it skips, not those of earlier passes (whose
        positions may name other inputs).
        """
        async with self._transaction() as tx:
            await tx.execute(
                "INSERT INTO campaignkit_runs (run, poll, created) VALUES (?, ?, ?)"
                " ON CONFLICT (run) DO NOTHING",
                run,
                poll,
                time.time(),
            )
            info = await self._run_info(tx, run)
            if input_pass is not None and info is not None and info.poll == poll:
                await tx.execute(
                    "UPDATE campaignkit_runs SET input_pass = ?, input_done = 0, total = NULL"
                    " WHERE run = ?",
                    input_pass,
                    run,
                )
                await tx.execute("DELETE FROM campaignkit_run_stops WHERE run = ?", run)
                info = await self._run_info(tx, run)
        assert info is not None
        if info.poll != poll:
            raise LedgerError(
                f"run {run!r} of this ledger sends poll {info.poll}, not poll {poll}: "
                "name another run (run=...)"
            )
        return info

    # -- planning and claiming

    @retried
    async def plan(
        self,
        run: str,
        chunk: str,
        recipients: Sequence[Recipient],
        *,
        retry_rejected: bool = False,
        ignore_suppression: bool = False,
        deferred: Mapping[str, str] | None = None,
    ) -> list[Record]:
        """File ``recipients`` as planned in ``chunk``.

        A recipient new to the run, or held as planned (by an earlier,
        interrupted producer), deferred (over the daily limit) or
        suppressed (by an earlier pass), joins ``chunk``; a rejected one too
        with ``retry_rejected``. One whose number is on the suppression list
        joins it as suppressed (the reason in its detail), unless
        ``ignore_suppression``; one whose phone ``deferred`` maps to a detail
        joins it as deferred with it. Every other recipient keeps its record.
        Returned: the records of the recipients this chunk will not send
        (held, suppressed or deferred).
        """
        now = time.time()
        # Read as columns: send_bulk's chunks come so, with no Recipient made a person.
        columns = Recipients.of(recipients)
        deferred = deferred or {}
        async with self._transaction() as tx:
            await tx.execute(
                "INSERT INTO campaignkit_chunks (run, chunk, size, created) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (run, chunk) DO NOTHING",
                run,
                chunk,
                len(recipients),
                now,
            )
            listed = {} if ignore_suppression else await self._suppressions_of(tx, columns.phones)
            await tx.executemany(
                "INSERT INTO campaignkit_recipients"
                " (run, phone, position, chunk, state, detail, user_wire, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run, phone) DO UPDATE SET chunk = excluded.chunk,"
                " position = excluded.position, user_wire = excluded.user_wire,"
                " state = excluded.state, claim = NULL, detail = excluded.detail,"
                " updated = excluded.updated"
                " WHERE campaignkit_recipients.state IN ('planned', 'deferred', 'suppressed'"
                + (", 'rejected')" if retry_rejected else ")"),
                [
                    (
                        *(run, phone, position, chunk),
                        *_filed(listed.get(phone), deferred.get(phone)),
                        *(user, now),
                    )
                    for phone, position, user in zip(
                        columns.phones, columns.positions, columns.users, strict=True
                    )
                ],
            )
            held: list[Record] = []
            for start in range(0, len(recipients), BATCH):
                phones = list(columns.phones[start : start + BATCH])
                condition, args = tx.any_of("phone", phones)
                rows = await tx.fetch(
                    "SELECT phone, position, state, launch_request_id, detail, user_wire, claim"
                    " FROM campaignkit_recipients WHERE run = ?"
                    f" AND (chunk <> ? OR state IN ('suppressed', 'deferred')) AND {condition}",
                    run,
                    chunk,
                    *args,
                )
                held.extend(Record(*row) for row in rows)
        return held

    async def claim(self, run: str, chunk: str, *, owner: str = "") -> Claim | None:
        """Atomically take the planned recipients of ``chunk`` (None if none are left).

        Committed before it returns: only then may a request carry them.
        """
        return await self._claim(run, chunk, owner, uuid.uuid4().hex)

    @retried
    async def _claim(self, run: str, chunk: str, owner: str, token: str) -> Claim | None:
        # Run again after a connection lost during COMMIT, the claim takes
        # back what it may already hold: never stranded in flight unsent.
        now = time.time()
        async with self._transaction() as tx:
            # Cheap, and nothing leaves before it: a ledger replaced under a
            # running send would let it message everyone its runs already reached.
            await check_identity(tx, self.identity, repr(self))
            await self._suppress_late(tx, run, chunk, now)
            await self._defer_over_budget(tx, run, chunk, now)
            rows = await tx.fetch(
                "UPDATE campaignkit_recipients SET state = 'in_flight', claim = ?, updated = ?"
                " WHERE run = ? AND chunk = ?"
                " AND (state = 'planned' OR (state = 'in_flight' AND claim = ?))"
                " RETURNING phone, position, user_wire",
                token,
                now,
                run,
                chunk,
                token,
            )
            if not rows:
                return None
            await tx.execute(
                "INSERT INTO campaignkit_claims"
                " (run, claim, chunk, owner, size, claimed, expires, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'in_flight')"
                " ON CONFLICT (run, claim) DO UPDATE SET size = excluded.size",
                run,
                token,
                chunk,
                owner,
                len(rows),
                now,
                now + self.claim_ttl,
            )
        recipients = sorted(
            (Recipient(phone, position, user) for phone, position, user in rows),
            key=attrgetter("position"),
        )
        # In input order, as the request will carry them.
        return Claim(token, chunk, tuple(recipients), now + self.claim_ttl)

    @retried
    async def settle(
        self,
        run: str,
        claim: str,
        state: str,
        *,
        launch_request_id: str | None = None,
        ack: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Record what became of a claim's request: accepted, rejected or ambiguous.

        A claim already reported ambiguous because it expired takes the
        outcome its sender learnt after all.
        """
        if state not in (ACCEPTED, REJECTED, AMBIGUOUS):
            raise LedgerError(f"a claim settles as accepted, rejected or ambiguous, not {state!r}")
        async with self._transaction() as tx:
            await tx.execute(
                "UPDATE campaignkit_claims SET state = ?, ack = ?, detail = ?"
                " WHERE run = ? AND claim = ? AND state IN ('in_flight', 'ambiguous')",
                state,
                ack,
                detail,
                run,
                claim,
            )
            await tx.execute(
                "UPDATE campaignkit_recipients SET state = ?, launch_request_id = ?, detail = ?,"
                " updated = ? WHERE run = ? AND claim = ? AND state IN ('in_flight', 'ambiguous')",
                state,
                launch_request_id,
                detail,
                time.time(),
                run,
                claim,
            )
