"""One transaction of the SQL ledgers' store: the primitives of
:class:`~._store.StoreTx`, in SQL that SQLite and PostgreSQL both run, each
one statement a set (``executemany`` for rows, ``IN`` lists of at most
:data:`~._schema.BATCH` values). A claim writes no recipient: what a
recipient holds is read as :mod:`._sql_held` says.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from itertools import repeat
from operator import add, itemgetter
from typing import Any, Final, TypeVar

from .._funnel import OutcomeGroup
from ._outcomes import FACTS, OUTCOME_COLUMNS, STATUS_UPSERT, RecipientOutcome, StatusRow
from ._records import IN_FLIGHT, PLANNED, Recipients, Record, RunInfo, Skipped, spans
from ._schema import RUN_COLUMNS, RUN_JOINS, RUNS, Transaction, batches, in_list, set_clause
from ._sql_held import CHUNK_HELD, REPLAN, RUN_OF_PHONE, TAKEN, held_as, held_joins, record_columns
from ._store import ClaimRow, Where
from ._suppression import Suppression

T = TypeVar("T")
SUPPRESSION_COLUMNS: Final = "phone, reason, source, added"
_LISTED: Final = "s.phone, s.reason, s.source, s.added"
# Rows one INSERT of suppressions carries (4 values each: under SQLite's 32,766 variables).
_LISTED_ROWS: Final = 1000
# The columns a move or a claim update may set: never a caller's text.
_RECIPIENT_FIELDS: Final = frozenset({"detail", "launch_request_id", "claim"})
_CLAIM_FIELDS: Final = frozenset({"ack", "detail", "launch_request_id"})
_RUN_FIELDS: Final = frozenset({"input_pass", "total", "input_done"})


class SqlTx:
    """The store's primitives in one SQL transaction (see :class:`~._store.StoreTx`)."""

    def __init__(
        self, tx: Transaction, *, ends: bool = True, new_runs: set[str] | None = None
    ) -> None:
        self.sql = tx
        self._ends = ends
        """Whether this transaction ends with a body run at once (not a
        rehearsal's, which its owner ends)."""
        self._new_runs = new_runs
        """The store's runs planned without a lookup (None: none, a rehearsal's)."""

    async def at_once(self, body: Callable[[SqlTx], Coroutine[Any, Any, T]]) -> T:
        if not self._ends:
            return await body(self)
        return await self.sql.at_once(lambda: body(self))

    # -- the ledger and its runs

    async def identity(self) -> str | None:
        rows = await self.sql.fetch("SELECT identity FROM campaignkit_ledger")
        return str(rows[0][0]) if rows else None

    async def set_identity(self, identity: str, created: float) -> None:
        await self.sql.execute(
            "INSERT INTO campaignkit_ledger (identity, created) VALUES (?, ?)", identity, created
        )

    async def run(self, run: str) -> tuple[RunInfo, str] | None:
        rows = await self.sql.fetch(f"{RUNS} WHERE r.run = ?", run)
        return (RunInfo.of_row(rows[0]), rows[0][6]) if rows else None

    async def run_context(self, run: str) -> tuple[str | None, RunInfo | None, str | None]:
        rows = await self.sql.fetch(
            f"SELECT l.identity, o.options, {RUN_COLUMNS} FROM campaignkit_ledger l"
            f" LEFT JOIN campaignkit_runs r ON r.run = ?{RUN_JOINS}"
            " LEFT JOIN campaignkit_run_options o ON o.run = r.run",
            run,
        )
        if not rows:
            return None, None, None
        identity, options, *found = rows[0]
        return str(identity), None if found[0] is None else RunInfo.of_row(tuple(found)), options

    async def runs(self) -> list[RunInfo]:
        return [
            RunInfo.of_row(row)
            for row in await self.sql.fetch(f"{RUNS} ORDER BY r.created DESC, r.run")
        ]

    async def add_run(self, run: str, poll: str, created: float) -> None:
        await self.sql.execute(
            "INSERT INTO campaignkit_runs (run, poll, created) VALUES (?, ?, ?)"
            " ON CONFLICT (run) DO NOTHING",
            *(run, poll, created),
        )

    async def update_run(self, run: str, fields: Mapping[str, Any]) -> None:
        values = {k: int(v) if k == "input_done" else v for k, v in fields.items()}
        sets, args = set_clause(values, _RUN_FIELDS)
        await self.sql.execute(
            f"UPDATE campaignkit_runs SET run = run{sets} WHERE run = ?", *args, run
        )

    async def stop_run(self, run: str, detail: str, stopped: float) -> None:
        await self.sql.execute(
            "INSERT INTO campaignkit_run_stops (run, detail, stopped)"
            " SELECT run, ?, ? FROM campaignkit_runs WHERE run = ? ON CONFLICT (run) DO NOTHING",
            *(detail, stopped, run),
        )

    async def clear_stop(self, run: str) -> None:
        await self.sql.execute("DELETE FROM campaignkit_run_stops WHERE run = ?", run)

    async def save_options(self, run: str, options: str, saved: float) -> None:
        await self.sql.execute(
            "INSERT INTO campaignkit_run_options (run, options, saved) VALUES (?, ?, ?)"
            " ON CONFLICT (run) DO UPDATE SET options = excluded.options, saved = excluded.saved",
            *(run, options, saved),
        )

    async def options(self, run: str) -> str | None:
        rows = await self.sql.fetch(
            "SELECT options FROM campaignkit_run_options WHERE run = ?", run
        )
        return str(rows[0][0]) if rows else None

    async def lock(self, name: str) -> None:
        # The row's lock is held to the end of the transaction (SQLite's
        # BEGIN IMMEDIATE already serialises writers).
        await self.sql.execute(
            "INSERT INTO campaignkit_locks (name, taken) VALUES (?, 0)"
            " ON CONFLICT (name) DO UPDATE SET taken = campaignkit_locks.taken + 1",
            name,
        )

    # -- chunks, skipped inputs, claims

    async def add_chunk(self, run: str, chunk: str, size: int, created: float) -> None:
        await self.sql.execute(
            "INSERT INTO campaignkit_chunks (run, chunk, size, created) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (run, chunk) DO NOTHING",
            *(run, chunk, size, created),
        )

    async def mark_enqueued(self, run: str, chunk: str) -> None:
        await self.sql.execute(
            "UPDATE campaignkit_chunks SET enqueued = 1 WHERE run = ? AND chunk = ?", run, chunk
        )

    async def unenqueued_chunks(self, run: str, state: str) -> list[str]:
        rows = await self.sql.fetch(
            "SELECT c.chunk FROM campaignkit_chunks c WHERE c.run = ? AND c.enqueued = 0"
            f" AND EXISTS (SELECT 1 FROM campaignkit_recipients r{held_joins('r')}"
            f" WHERE r.run = c.run AND r.chunk = c.chunk AND {held_as('r', 'state')} = ?)"
            " ORDER BY c.created",
            *(run, state),
        )
        return [row[0] for row in rows]

    async def add_skipped(self, run: str, input_pass: str, items: Sequence[Skipped]) -> None:
        await self.sql.executemany(
            "INSERT INTO campaignkit_skipped"
            " (run, input_pass, position, kind, phone, reason, line, item)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run, input_pass, position) DO NOTHING",
            [
                (run, input_pass, s.position, s.kind, s.phone, s.reason, s.line, s.item)
                for s in items
            ],
        )

    async def skipped(self, run: str, input_pass: str) -> list[Skipped]:
        rows = await self.sql.fetch(
            "SELECT position, kind, phone, reason, line, item FROM campaignkit_skipped"
            " WHERE run = ? AND input_pass = ? ORDER BY position",
            *(run, input_pass),
        )
        return [Skipped(*row) for row in rows]

    async def add_claim(
        self,
        run: str,
        claim: str,
        chunk: str,
        owner: str,
        positions: Sequence[int],
        claimed: float,
        expires: float,
    ) -> None:
        size, spanned = len(positions), spans(positions)
        await self.sql.execute(
            "INSERT INTO campaignkit_claims (run, claim, chunk, owner, size, claimed, expires,"
            " state, updated, positions) VALUES (?, ?, ?, ?, ?, ?, ?, 'in_flight', ?, ?)"
            " ON CONFLICT (run, claim) DO UPDATE SET size = excluded.size,"
            " state = excluded.state, claimed = excluded.claimed, expires = excluded.expires,"
            " updated = excluded.updated, positions = excluded.positions",
            *(run, claim, chunk, owner, size, claimed, expires, claimed, spanned),
        )

    async def update_claims(
        self,
        run: str,
        to: str,
        states: Collection[str],
        *,
        claim: str | None = None,
        expired_before: float | None = None,
        fields: Mapping[str, str | None] | None = None,
    ) -> list[str]:
        sets, args = set_clause(fields or {}, _CLAIM_FIELDS)
        where, more = "", list[Any]()
        if claim is not None:
            where, more = where + " AND claim = ?", [*more, claim]
        if expired_before is not None:
            where, more = where + " AND expires < ?", [*more, expired_before]
        rows = await self.sql.fetch(
            f"UPDATE campaignkit_claims SET state = ?{sets}"
            f" WHERE run = ? AND state IN {in_list(states)}{where} RETURNING claim",
            *(to, *args, run, *more),
        )
        return [row[0] for row in rows]

    async def claims(self, run: str) -> list[ClaimRow]:
        rows = await self.sql.fetch(
            "SELECT claim, chunk, state, ack, detail FROM campaignkit_claims"
            " WHERE run = ? ORDER BY claimed, claim",
            run,
        )
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    # -- recipients

    async def upsert(
        self,
        run: str,
        chunk: str,
        recipients: Recipients,
        state: str,
        detail: str | None,
        replace: Collection[str],
        now: float,
    ) -> list[Record]:
        phones, positions, users = recipients.phones, recipients.positions, recipients.users
        if len(set(phones)) < len(phones):  # a phone given twice: its last row is filed
            kept_rows = sorted(dict(zip(phones, range(len(phones)), strict=True)).values())
            phones = [phones[i] for i in kept_rows]
            positions = [positions[i] for i in kept_rows]
            users = [users[i] for i in kept_rows]
        # A run whose last plan here met none of its recipients (a first send)
        # most likely meets none again: no lookup of each phone (a third of a plan
        # in PostgreSQL: benchmarks, row 17); one met is a conflict, run again.
        new_runs = self._new_runs if self._new_runs is not None else set()
        guessed = run in new_runs
        new_runs.discard(run)  # until this insert is done
        free = None if guessed else await self._chunks_free(run, phones, replace)
        conflict = None
        if free is not None:
            conflict = REPLAN.format(replace=in_list(replace), free=in_list(free, quoted=True))
        changed = await self.sql.insert(
            "campaignkit_recipients",
            [
                ("run", "text", run),
                ("chunk", "text", chunk),
                ("state", "text", state),
                ("detail", "text", detail),
                ("updated", "double precision", now),
            ],
            [
                ("phone", "text", phones),
                ("position", "bigint", positions),
                ("user_wire", "text", users),
            ],
            conflict,
        )
        if free is None:
            new_runs.add(run)
        if changed == len(phones):
            return []  # each one new to the run or replaced: none kept
        # Those kept are still in their chunk (the others are in this one).
        kept: list[Record] = []
        for phones in batches(recipients.phones):
            condition, args = self.sql.any_of("r.phone", phones)
            rows = await self.sql.fetch(
                f"SELECT {record_columns('r')} FROM campaignkit_recipients r{held_joins('r')}"
                f" WHERE r.run = ? AND r.chunk <> ? AND {condition}",
                *(run, chunk, *args),
            )
            kept += (Record(*row) for row in rows)
        return kept

    async def _chunks_free(
        self, run: str, phones: Sequence[str], replace: Collection[str]
    ) -> list[str] | None:
        """The chunks holding planned rows of ``phones`` that a plan may take
        them from (no claim holds the chunk, or its claim's state is one of
        ``replace``), locked against new claims to the end of the transaction;
        None if the run holds none of ``phones``.

        Read before the upsert, not in its conflict clause: PostgreSQL would
        judge there, once the row it waited for is free, with a claim made
        meanwhile unseen (the snapshot the statement began with), and move a
        recipient that claim is sending. A row planned by another
        transaction since, in a chunk not read here, is kept where it is.
        """
        found = []
        for batch in batches(phones):
            condition, args = self.sql.any_of("phone", batch)
            found += await self.sql.fetch(
                f"SELECT chunk, state FROM campaignkit_recipients WHERE run = ? AND {condition}",
                *(run, *args),
            )
        if not found:
            return None
        planned_in = {chunk for chunk, state in found if state == PLANNED}
        if not planned_in:
            return []
        condition, args = self.sql.any_of("k.chunk", sorted(planned_in))  # locked in one order
        chunks: list[tuple[str, str | None]] = await self.sql.fetch(
            "SELECT k.chunk, k.claim FROM campaignkit_chunks k WHERE k.run = ?"
            f" AND {condition} ORDER BY k.chunk{self.sql.locking}",
            *(run, *args),
        )
        held = [claim for _, claim in chunks if claim is not None]
        keeping: set[str] = set()
        if held:
            # A statement of its own: it reads the claims committed while it waited.
            condition, args = self.sql.any_of("claim", held)
            rows = await self.sql.fetch(
                "SELECT claim FROM campaignkit_claims WHERE run = ?"
                f" AND state NOT IN {in_list([*replace, PLANNED])} AND {condition}",
                *(run, *args),
            )
            keeping = {row[0] for row in rows}
        return [chunk for chunk, claim in chunks if claim not in keeping]

    async def hold_chunk(self, run: str, chunk: str, claim: str) -> bool:
        # The chunk's row (its plan made it), locked to the end of the
        # transaction: a second claimer of it waits, then finds it held. Its
        # claim is cleared when the claim takes nothing or is put back to planned.
        return bool(
            await self.sql.execute(
                "UPDATE campaignkit_chunks SET claim = ? WHERE run = ? AND chunk = ?"
                " AND (claim IS NULL OR claim = ?)",
                *(claim, run, chunk, claim),
            )
        )

    async def take(
        self, run: str, chunk: str, states: Collection[str], to: str, claim: str, now: float
    ) -> Recipients:
        # Held by the claim, the chunk names it: its rows left as they are
        # are the claim's, in ``to`` as its row says (see the module).
        if to != IN_FLIGHT or set(states) != {PLANNED}:
            raise ValueError(f"a claim takes the planned to in flight, not {states} to {to}")
        rows = await self.sql.fetch(
            "SELECT phone, position, user_wire FROM campaignkit_recipients"
            " WHERE run = ? AND chunk = ? AND state = ?",
            *(run, chunk, PLANNED),
        )
        if not rows:
            await self._free_chunks(run, [claim])
        rows.sort(key=itemgetter(1))  # in input order, as the request will carry them
        phones, positions, users = map(list, zip(*rows, strict=True)) if rows else ([], [], [])
        return Recipients(phones, positions, users)

    async def _free_chunks(self, run: str, claims: Sequence[str]) -> None:
        """Let the chunks ``claims`` hold be claimed again."""
        held, chosen = self.sql.any_of("claim", claims)
        await self.sql.execute(
            f"UPDATE campaignkit_chunks SET claim = NULL WHERE run = ? AND {held}", run, *chosen
        )

    async def move(
        self,
        run: str,
        where: Where,
        to: str,
        now: float,
        fields: Mapping[str, str | None] | None = None,
    ) -> int:
        if where.claims is not None:
            return await self._move_claimed(run, where.claims, where.states, to, now, fields or {})
        sets, args = set_clause(fields or {}, _RECIPIENT_FIELDS)
        # A planned row of a chunk a claim holds is not planned (see ._sql_held).
        condition, more = (
            f"run = ? AND state IN {in_list(where.states)} AND (state <> 'planned' OR NOT EXISTS"
            f" ({CHUNK_HELD} AND c.run = campaignkit_recipients.run"
            " AND c.chunk = campaignkit_recipients.chunk))",
            [run],
        )
        if where.chunk is not None:
            condition, more = condition + " AND chunk = ?", [*more, where.chunk]
        moved = 0
        for batch in [None] if where.phones is None else batches(where.phones):
            selected, chosen = ("1 = 1", ()) if batch is None else self.sql.any_of("phone", batch)
            moved += await self.sql.execute(
                f"UPDATE campaignkit_recipients SET state = ?{sets}, updated = ?"
                f" WHERE {condition} AND {selected}",
                *(to, *args, now, *more, *chosen),
            )
        return moved

    async def _move_claimed(
        self,
        run: str,
        claims: Sequence[str],
        states: Collection[str],
        to: str,
        now: float,
        fields: Mapping[str, str | None],
    ) -> int:
        """:meth:`move` of the recipients of ``claims``, whose state the
        claims hold already (:meth:`update_claims` moved them to ``to``)."""
        sets, args = set_clause(fields, _RECIPIENT_FIELDS)
        kept = {name: fields[name] for name in ("launch_request_id", "detail") if name in fields}
        claim_sets, claim_args = set_clause(kept, _CLAIM_FIELDS)
        moved = 0
        for batch in batches(claims):
            # Those their chunk names: the claim's row holds their state (see ._sql_held).
            own, chosen = self.sql.any_of("claim", batch)
            sizes = await self.sql.fetch(
                f"UPDATE campaignkit_claims SET updated = ?{claim_sets} WHERE run = ?"
                f" AND {own} AND EXISTS (SELECT 1 FROM campaignkit_chunks k"
                " WHERE k.run = campaignkit_claims.run AND k.chunk = campaignkit_claims.chunk"
                " AND k.claim = campaignkit_claims.claim) RETURNING size",
                *(now, *claim_args, run, *chosen),
            )
            named_c, _ = self.sql.any_of("c.claim", batch)
            moved += sum(int(size) for (size,) in sizes)
            # Those of claims made before (schema 2), each row naming its claim:
            # through the claims' chunks, the recipients' one secondary index.
            named, more = self.sql.any_of("claim", batch)
            moved += await self.sql.execute(
                f"UPDATE campaignkit_recipients SET state = ?{sets}, updated = ?"
                f" WHERE run = ? AND state IN {in_list(states)} AND chunk IN"
                f" (SELECT c.chunk FROM campaignkit_claims c WHERE c.run = ? AND {named_c}"
                " AND NOT EXISTS (SELECT 1 FROM campaignkit_chunks k WHERE k.run = c.run"
                f" AND k.chunk = c.chunk AND k.claim = c.claim)) AND {named}",
                *(to, *args, now, run, run, *chosen, *more),
            )
            if to == PLANNED:
                await self._free_chunks(run, batch)
        return moved

    async def phones_in(self, run: str, chunk: str, state: str) -> list[str]:
        rows = await self.sql.fetch(
            "SELECT phone FROM campaignkit_recipients WHERE run = ? AND chunk = ?"
            " AND state = ? ORDER BY position",
            *(run, chunk, state),
        )
        return [row[0] for row in rows]

    async def listed_in(self, run: str, chunk: str, state: str) -> list[tuple[str, Suppression]]:
        # Each recipient of the chunk looked up only when a number was listed
        # since the chunk was made (before any of its records last changed),
        # found through the entries' index of times: a claim's check costs
        # next to nothing while the list does not change (benchmarks, row 16).
        rows = await self.sql.fetch(
            f"SELECT {_LISTED} FROM campaignkit_recipients r"
            " JOIN campaignkit_suppressions s ON s.phone = r.phone"
            " WHERE r.run = ? AND r.chunk = ? AND r.state = ? AND s.added >= r.updated"
            " AND EXISTS (SELECT 1 FROM campaignkit_suppressions n WHERE n.added >="
            " COALESCE((SELECT c.created FROM campaignkit_chunks c"
            " WHERE c.run = ? AND c.chunk = ?), 0))",
            *(run, chunk, state, run, chunk),
        )
        return [(row[0], Suppression(*row)) for row in rows]

    async def budget_used(self, since: float, states: Collection[str]) -> tuple[int, float | None]:
        used, oldest = (
            await self.sql.fetch(
                "SELECT COUNT(DISTINCT r.phone), MIN(c.claimed)"
                + TAKEN.format(states=in_list(states)),
                since,
            )
        )[0]
        return int(used), None if oldest is None else float(oldest)

    async def counted_among(
        self, since: float, states: Collection[str], phones: Sequence[str]
    ) -> set[str]:
        counted: set[str] = set()
        for batch in batches(phones):
            condition, args = self.sql.any_of("r.phone", batch)
            rows = await self.sql.fetch(
                "SELECT DISTINCT r.phone"
                + TAKEN.format(states=in_list(states))
                + f" AND {condition}",
                since,
                *args,
            )
            counted.update(row[0] for row in rows)
        return counted

    async def counts(self, run: str) -> dict[str, int]:
        # The planned rows counted chunk by chunk, then by what their chunk's claim holds.
        rows = await self.sql.fetch(
            "SELECT COALESCE(c.state, g.state), SUM(g.n) FROM (SELECT state,"
            " CASE WHEN state = 'planned' THEN chunk END AS chunk, COUNT(*) AS n"
            " FROM campaignkit_recipients WHERE run = ? GROUP BY 1, 2) g"
            " LEFT JOIN campaignkit_chunks k ON k.run = ? AND k.chunk = g.chunk"
            " LEFT JOIN campaignkit_claims c ON c.run = k.run AND c.claim = k.claim"
            " AND c.state <> 'planned' GROUP BY 1",
            *(run, run),
        )
        return {state: int(n) for state, n in rows}

    async def skipped_counts(self, run: str, input_pass: str) -> dict[str, int]:
        rows = await self.sql.fetch(
            "SELECT kind, COUNT(*) FROM campaignkit_skipped WHERE run = ? AND input_pass = ?"
            " GROUP BY kind",
            *(run, input_pass),
        )
        return {kind: int(n) for kind, n in rows}

    async def held(self, run: str, phones: Sequence[str]) -> dict[str, tuple[Record, float | None]]:
        held: dict[str, tuple[Record, float | None]] = {}
        for batch in batches(phones):
            condition, args = self.sql.any_of("r.phone", batch)
            rows = await self.sql.fetch(
                f"SELECT {record_columns('r')}, c.claimed FROM campaignkit_recipients r"
                f"{held_joins('r')} LEFT JOIN campaignkit_claims c ON c.run = r.run"
                f" AND c.claim = {held_as('r', 'claim')} WHERE r.run = ? AND {condition}",
                run,
                *args,
            )
            held.update((row[0], (Record(*row[:7]), row[7])) for row in rows)
        return held

    async def last_update(self, run: str) -> float | None:
        rows = await self.sql.fetch(
            "SELECT MAX(updated) FROM campaignkit_recipients WHERE run = ?"
            " UNION ALL SELECT MAX(updated) FROM campaignkit_claims WHERE run = ?",
            *(run, run),
        )
        times = [float(row[0]) for row in rows if row[0] is not None]
        return max(times, default=None)

    # -- sending lines

    async def lines_of(self, phones: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for batch in batches(phones):
            condition, args = self.sql.any_of("phone", batch)
            rows = await self.sql.fetch(
                f"SELECT phone, line FROM campaignkit_lines WHERE {condition}", *args
            )
            found.update(rows)
        return found

    async def line_load(self, lines: Sequence[str]) -> dict[str, int]:
        condition, args = self.sql.any_of("line", list(lines))
        rows = await self.sql.fetch(
            f"SELECT line, people FROM campaignkit_line_load WHERE {condition}", *args
        )
        return {line: int(people) for line, people in rows}

    async def set_lines(self, assigned: Mapping[str, str], now: float) -> None:
        await self.sql.executemany(
            "INSERT INTO campaignkit_lines (phone, line, assigned) VALUES (?, ?, ?)"
            " ON CONFLICT (phone) DO UPDATE SET line = excluded.line, assigned = excluded.assigned",
            [(phone, line, now) for phone, line in assigned.items()],
        )

    async def add_line_load(self, changes: Mapping[str, int]) -> None:
        await self.sql.executemany(
            "INSERT INTO campaignkit_line_load (line, people) VALUES (?, ?)"
            " ON CONFLICT (line) DO UPDATE"
            " SET people = campaignkit_line_load.people + excluded.people",
            list(changes.items()),
        )

    # -- the suppression list

    async def suppressions_of(self, phones: Sequence[str]) -> dict[str, Suppression]:
        found: dict[str, Suppression] = {}
        # Looked up only when the list holds a number: a plan's lookup binds
        # a chunk's numbers, most of its time in an empty list (benchmarks,
        # row 17).
        if not phones or not await self.sql.fetch("SELECT 1 FROM campaignkit_suppressions LIMIT 1"):
            return found
        for batch in batches(phones):
            condition, args = self.sql.any_of("phone", batch)
            rows = await self.sql.fetch(
                f"SELECT {SUPPRESSION_COLUMNS} FROM campaignkit_suppressions WHERE {condition}",
                *args,
            )
            found.update((row[0], Suppression(*row)) for row in rows)
        return found

    async def add_suppressions(
        self, phones: Sequence[str], reason: str, source: str | None, added: float
    ) -> int:
        new = 0
        # In one order whoever adds them: two writers of overlapping numbers
        # wait for each other rather than deadlock.
        phones = sorted(phones)
        for start in range(0, len(phones), _LISTED_ROWS):
            batch = phones[start : start + _LISTED_ROWS]
            rows = await self.sql.fetch(
                f"INSERT INTO campaignkit_suppressions ({SUPPRESSION_COLUMNS}) VALUES "
                + ", ".join(["(?, ?, ?, ?)"] * len(batch))
                + " ON CONFLICT (phone) DO NOTHING RETURNING phone",
                *(value for phone in batch for value in (phone, reason, source, added)),
            )
            new += len(rows)
        return new

    async def remove_suppressions(self, phones: Sequence[str]) -> int:
        removed = 0
        for batch in batches(phones):
            condition, args = self.sql.any_of("phone", batch)
            removed += await self.sql.execute(
                f"DELETE FROM campaignkit_suppressions WHERE {condition}", *args
            )
        return removed

    # -- webhook deliveries

    async def add_seen(self, namespace: str, key: str, seen: float) -> bool:
        return bool(
            await self.sql.execute(
                "INSERT INTO campaignkit_seen (namespace, key, seen) VALUES (?, ?, ?)"
                " ON CONFLICT (namespace, key) DO NOTHING",
                *(namespace, key, seen),
            )
        )

    async def prune_seen(self, namespace: str, before: float) -> int:
        return await self.sql.execute(
            "DELETE FROM campaignkit_seen WHERE namespace = ? AND seen < ?", namespace, before
        )

    async def forget_seen(self, namespace: str, key: str) -> None:
        await self.sql.execute(
            "DELETE FROM campaignkit_seen WHERE namespace = ? AND key = ?", namespace, key
        )

    # -- outcomes

    async def upsert_statuses(self, run: str, rows: Sequence[StatusRow]) -> None:
        # Each row's values after the run's, joined in C (benchmarks row 15).
        await self.sql.executemany(STATUS_UPSERT, map(add, repeat((run,)), rows))

    async def add_final(self, run: str, launches: Sequence[str], at: float) -> None:
        await self.sql.executemany(
            "INSERT INTO campaignkit_followed (run, launch_request_id, final_at)"
            " VALUES (?, ?, ?) ON CONFLICT (run, launch_request_id) DO NOTHING",
            [(run, launch, at) for launch in launches],
        )

    async def final_launches(self, run: str) -> set[str]:
        rows = await self.sql.fetch(
            "SELECT launch_request_id FROM campaignkit_followed WHERE run = ?", run
        )
        return {row[0] for row in rows}

    async def run_of_accepted(self, phone: str, state: str) -> str | None:
        rows = await self.sql.fetch(RUN_OF_PHONE, phone, state)
        return str(rows[0][0]) if rows else None

    async def set_fact(
        self,
        run: str,
        phone: str,
        fact: str,
        at: float,
        conversation_id: str | None,
        answer: str | None,
    ) -> None:
        if fact not in FACTS.values():
            raise ValueError(f"not a fact a ledger records: {fact!r}")
        await self.sql.execute(
            f"INSERT INTO campaignkit_outcomes (run, phone, conversation_id, {fact}, answer)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (run, phone) DO UPDATE SET"
            f" {fact} = COALESCE(campaignkit_outcomes.{fact}, excluded.{fact}),"
            " conversation_id ="
            " COALESCE(campaignkit_outcomes.conversation_id, excluded.conversation_id),"
            " answer = COALESCE(campaignkit_outcomes.answer, excluded.answer)",
            *(run, phone, conversation_id, at, answer),
        )

    async def launch_phones(
        self, run: str, state: str, launches: Collection[str]
    ) -> dict[str, list[str]]:
        # A row per launch, its phones (never a space in them) joined: half
        # the time of a row per phone (benchmarks row 15).
        # Those of claims their chunk names (see the module), then those of
        # claims of schema 2, each row naming its launch.
        rows = await self.sql.fetch(
            f"SELECT c.launch_request_id, {self.sql.spaced('r.phone')}"
            " FROM campaignkit_claims c JOIN campaignkit_recipients r ON r.run = c.run"
            " AND r.chunk = c.chunk AND r.state = 'planned'"
            " WHERE c.run = ? AND c.state = ? GROUP BY c.launch_request_id"
            f" UNION ALL SELECT launch_request_id, {self.sql.spaced('phone')}"
            " FROM campaignkit_recipients WHERE run = ? AND state = ? GROUP BY launch_request_id",
            *(run, state, run, state),
        )
        phones: dict[str, list[str]] = {}
        for launch, joined in rows:
            if launch in launches:
                phones.setdefault(launch, []).extend(joined.split(" "))
        return phones

    async def outcomes(self, run: str) -> list[RecipientOutcome]:
        rows = await self.sql.fetch(
            f"SELECT {OUTCOME_COLUMNS} FROM campaignkit_outcomes WHERE run = ? ORDER BY phone", run
        )
        return [RecipientOutcome.of_row(*row) for row in rows]

    async def outcome_groups(self, run: str) -> list[OutcomeGroup]:
        rows = await self.sql.fetch(
            "SELECT status, delivered_at IS NOT NULL, read_at IS NOT NULL,"
            " replied_at IS NOT NULL, opted_out_at IS NOT NULL, COUNT(*)"
            " FROM campaignkit_outcomes WHERE run = ? GROUP BY 1, 2, 3, 4, 5",
            run,
        )
        return [(s, bool(d), bool(r), bool(a), bool(o), int(n)) for s, d, r, a, o, n in rows]

    # -- paused runs

    async def pause_run(self, run: str, reason: str, detail: str, paused: float) -> bool:
        return bool(
            await self.sql.execute(
                "INSERT INTO campaignkit_run_pauses (run, reason, detail, paused)"
                " SELECT run, ?, ?, ? FROM campaignkit_runs WHERE run = ?"
                " ON CONFLICT (run) DO NOTHING",
                *(reason, detail, paused, run),
            )
        )

    async def resume_run(self, run: str) -> bool:
        return bool(await self.sql.execute("DELETE FROM campaignkit_run_pauses WHERE run = ?", run))

    async def judge_canary(self, run: str, judged: float) -> None:
        await self.sql.execute(
            "INSERT INTO campaignkit_run_canaries (run, judged) VALUES (?, ?)"
            " ON CONFLICT (run) DO NOTHING",
            *(run, judged),
        )

    async def running_runs(self, states: Collection[str]) -> list[str]:
        # Run by run, each a lookup of the recipients' primary key (as RUN_OF_PHONE).
        rows = await self.sql.fetch(
            "SELECT u.run FROM campaignkit_runs u WHERE NOT EXISTS (SELECT 1"
            " FROM campaignkit_run_stops s WHERE s.run = u.run) AND NOT EXISTS (SELECT 1"
            " FROM campaignkit_run_pauses p WHERE p.run = u.run) AND (u.input_done = 0"
            f" OR EXISTS (SELECT 1 FROM campaignkit_recipients r{held_joins('r')}"
            f" WHERE r.run = u.run AND {held_as('r', 'state')} IN {in_list(states)}))"
            " ORDER BY u.created, u.run"
        )
        return [row[0] for row in rows]

    async def settled_recent(
        self, run: str, limit: int, final: Collection[str], failures: Collection[str]
    ) -> list[tuple[float, int, int]]:
        # The run's outcomes (its primary key's prefix) and its rejected
        # claims (their state's index): never a scan of its recipients.
        rows = await self.sql.fetch(
            "SELECT COALESCE(status_at, delivered_at),"
            f" CASE WHEN status IN {in_list(failures)} THEN 1 ELSE 0 END"
            " FROM campaignkit_outcomes WHERE run = ?"
            f" AND (status IN {in_list(final)} OR delivered_at IS NOT NULL)"
            " ORDER BY 1 DESC LIMIT ?",
            *(run, limit),
        )
        claims = await self.sql.fetch(
            "SELECT claimed, size FROM campaignkit_claims WHERE run = ? AND state = 'rejected'"
            " ORDER BY claimed DESC LIMIT ?",
            *(run, limit),
        )
        groups = [(float(at), 1, int(failed)) for at, failed in rows]
        groups += ((float(at), int(size), int(size)) for at, size in claims)
        return sorted(groups, reverse=True)

    # One statement a chunk: its recipients (their chunk's index), each
    # looked up in every run by the recipients' (outcomes') primary key. No
    # index of phones across runs: each recipient's write stays as cheap.
    # Not DISTINCT (a phone found in two runs is deduplicated here): SQLite
    # would then read the run's every recipient in its primary key's order.

    async def contacted_in(
        self, run: str, chunk: str, state: str, since: float, states: Collection[str]
    ) -> list[str]:
        rows = await self.sql.fetch(
            "SELECT c.phone FROM campaignkit_recipients c"
            " CROSS JOIN campaignkit_runs u CROSS JOIN campaignkit_recipients r"
            f"{held_joins('r')}"
            " WHERE c.run = ? AND c.chunk = ? AND c.state = ? AND u.run <> c.run"
            f" AND r.run = u.run AND r.phone = c.phone AND {held_as('r', 'state')} IN"
            f" {in_list(states)} AND {held_as('r', 'updated')} >= ? AND NOT EXISTS (SELECT 1"
            " FROM campaignkit_outcomes o WHERE o.run = r.run AND o.phone = r.phone"
            f" AND o.replied_at >= {held_as('r', 'updated')})",
            *(run, chunk, state, since),
        )
        return list(dict.fromkeys(row[0] for row in rows))

    async def answered_in(self, run: str, chunk: str, state: str, since: float) -> list[str]:
        rows = await self.sql.fetch(
            "SELECT c.phone FROM campaignkit_recipients c"
            " CROSS JOIN campaignkit_runs u CROSS JOIN campaignkit_outcomes o"
            " WHERE c.run = ? AND c.chunk = ? AND c.state = ? AND u.run <> c.run"
            " AND o.run = u.run AND o.phone = c.phone AND o.replied_at >= ?",
            *(run, chunk, state, since),
        )
        return list(dict.fromkeys(row[0] for row in rows))
