"""One transaction of the SQL ledgers' store: the primitives of
:class:`~._store.StoreTx`, in SQL that SQLite and PostgreSQL both run, each
one statement a set (``executemany`` for rows, ``IN`` lists of at most
:data:`~._schema.BATCH` values)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Coroutine, Mapping, Sequence
from itertools import repeat
from operator import add, itemgetter
from typing import Any, Final, TypeVar

from .._funnel import OutcomeGroup
from ._outcomes import FACTS, RecipientOutcome, StatusRow
from ._records import Recipients, Record, RunInfo, RunPause, Skipped
from ._schema import BATCH, Transaction
from ._store import ClaimRow, Where
from ._suppression import Suppression

T = TypeVar("T")

RECORD_COLUMNS: Final = "phone, position, state, launch_request_id, detail, user_wire, claim"
_RUN_COLUMNS: Final = (
    "r.run, r.poll, r.created, r.total, r.input_done, s.detail, r.input_pass,"
    " p.reason, p.detail, p.paused, c.judged"
)
_RUN_JOINS: Final = (
    " LEFT JOIN campaignkit_run_stops s ON s.run = r.run"
    " LEFT JOIN campaignkit_run_pauses p ON p.run = r.run"
    " LEFT JOIN campaignkit_run_canaries c ON c.run = r.run"
)
_RUNS: Final = f"SELECT {_RUN_COLUMNS} FROM campaignkit_runs r{_RUN_JOINS}"
SUPPRESSION_COLUMNS: Final = "phone, reason, source, added"
_LISTED: Final = "s.phone, s.reason, s.source, s.added"
# Rows one INSERT of suppressions carries (4 values each: under SQLite's 32,766 variables).
_LISTED_ROWS: Final = 1000
_OUTCOME: Final = (
    "phone, launch_request_id, conversation_id, status, status_at,"
    " delivered_at, read_at, replied_at, answer, opted_out_at"
)
# A status replaces the one held only when it differs: following a launch
# again (after an interruption) sees the same statuses, and keeps their times.
_STATUS_UPSERT: Final = (
    "INSERT INTO campaignkit_outcomes"
    " (run, phone, launch_request_id, conversation_id, status, status_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (run, phone) DO UPDATE SET launch_request_id = excluded.launch_request_id,"
    " conversation_id = excluded.conversation_id, status = excluded.status,"
    " status_at = excluded.status_at"
    " WHERE campaignkit_outcomes.status IS NULL"
    " OR campaignkit_outcomes.status <> excluded.status"
)
# Run by run, newest first, each a lookup of the recipients' primary key: no
# index of phones across runs, and few runs beside many recipients (a join
# let SQLite scan every recipient of every run).
RUN_OF_PHONE: Final = (
    "SELECT u.run FROM campaignkit_runs u WHERE EXISTS (SELECT 1"
    " FROM campaignkit_recipients r WHERE r.run = u.run AND r.phone = ?"
    " AND r.state = ?) ORDER BY u.created DESC, u.run DESC LIMIT 1"
)
"""The most recent run holding a phone in a state."""
# Recipients taken by a claim made after a time, in some states: each
# claim's found through its chunk (the recipients' one secondary index).
# CROSS JOIN: SQLite reads the claims first (PostgreSQL plans it freely).
_TAKEN: Final = (
    " FROM campaignkit_claims c CROSS JOIN campaignkit_recipients r"
    " WHERE r.run = c.run AND r.chunk = c.chunk AND r.claim = c.claim AND c.claimed > ?"
)
# The columns a move or a claim update may set: never a caller's text.
_RECIPIENT_FIELDS: Final = frozenset({"detail", "launch_request_id", "claim"})
_CLAIM_FIELDS: Final = frozenset({"ack", "detail"})
_RUN_FIELDS: Final = frozenset({"input_pass", "total", "input_done"})


def _in(values: Collection[str]) -> str:
    """``IN`` of literal states (never a caller's text: the ledger's constants)."""
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"


def _sets(fields: Mapping[str, Any], allowed: frozenset[str]) -> tuple[str, list[Any]]:
    """``column = ?`` for each of ``fields``, each after a comma, and their values."""
    if not fields.keys() <= allowed:
        raise ValueError(f"not columns a store sets: {sorted(fields.keys() - allowed)}")
    return "".join(f", {name} = ?" for name in fields), list(fields.values())


def _batches(values: Sequence[Any]) -> list[list[Any]]:
    """``values`` in lists of at most :data:`BATCH` (one, empty, if there are none)."""
    return [list(values[start : start + BATCH]) for start in range(0, len(values), BATCH)] or [[]]


class SqlTx:
    """The store's primitives in one SQL transaction (see :class:`~._store.StoreTx`)."""

    def __init__(self, tx: Transaction, *, ends: bool = True) -> None:
        self.sql = tx
        self._ends = ends
        """Whether this transaction ends with a body run at once (not a
        rehearsal's, which its owner ends)."""

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
        rows = await self.sql.fetch(f"{_RUNS} WHERE r.run = ?", run)
        return (_run_of(rows[0]), rows[0][6]) if rows else None

    async def run_context(self, run: str) -> tuple[str | None, RunInfo | None, str | None]:
        rows = await self.sql.fetch(
            f"SELECT l.identity, o.options, {_RUN_COLUMNS} FROM campaignkit_ledger l"
            f" LEFT JOIN campaignkit_runs r ON r.run = ?{_RUN_JOINS}"
            " LEFT JOIN campaignkit_run_options o ON o.run = r.run",
            run,
        )
        if not rows:
            return None, None, None
        identity, options, *found = rows[0]
        return str(identity), None if found[0] is None else _run_of(tuple(found)), options

    async def runs(self) -> list[RunInfo]:
        return [
            _run_of(row) for row in await self.sql.fetch(f"{_RUNS} ORDER BY r.created DESC, r.run")
        ]

    async def add_run(self, run: str, poll: str, created: float) -> None:
        await self.sql.execute(
            "INSERT INTO campaignkit_runs (run, poll, created) VALUES (?, ?, ?)"
            " ON CONFLICT (run) DO NOTHING",
            *(run, poll, created),
        )

    async def update_run(self, run: str, fields: Mapping[str, Any]) -> None:
        values = {k: int(v) if k == "input_done" else v for k, v in fields.items()}
        sets, args = _sets(values, _RUN_FIELDS)
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
            " AND EXISTS (SELECT 1 FROM campaignkit_recipients r WHERE r.run = c.run"
            " AND r.chunk = c.chunk AND r.state = ?) ORDER BY c.created",
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
        size: int,
        claimed: float,
        expires: float,
    ) -> None:
        await self.sql.execute(
            "INSERT INTO campaignkit_claims"
            " (run, claim, chunk, owner, size, claimed, expires, state)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 'in_flight')"
            " ON CONFLICT (run, claim) DO UPDATE SET size = excluded.size",
            *(run, claim, chunk, owner, size, claimed, expires),
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
        sets, args = _sets(fields or {}, _CLAIM_FIELDS)
        where, more = "", list[Any]()
        if claim is not None:
            where, more = where + " AND claim = ?", [*more, claim]
        if expired_before is not None:
            where, more = where + " AND expires < ?", [*more, expired_before]
        rows = await self.sql.fetch(
            f"UPDATE campaignkit_claims SET state = ?{sets}"
            f" WHERE run = ? AND state IN {_in(states)}{where} RETURNING claim",
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
        last = {phone: i for i, phone in enumerate(phones)}
        if len(last) < len(phones):  # a phone given twice: its last row is filed
            kept_rows = sorted(last.values())
            phones = [phones[i] for i in kept_rows]
            positions = [positions[i] for i in kept_rows]
            users = [users[i] for i in kept_rows]
        changed = await self.sql.insert(
            "INSERT INTO campaignkit_recipients"
            " (run, chunk, state, detail, updated, phone, position, user_wire)",
            [
                ("text", run),
                ("text", chunk),
                ("text", state),
                ("text", detail),
                ("double precision", now),
            ],
            [("text", phones), ("bigint", positions), ("text", users)],
            "ON CONFLICT (run, phone) DO UPDATE SET chunk = excluded.chunk,"
            " position = excluded.position, user_wire = excluded.user_wire,"
            " state = excluded.state, claim = NULL, detail = excluded.detail,"
            " updated = excluded.updated"
            f" WHERE campaignkit_recipients.state IN {_in(replace)}",
        )
        if changed == len(phones):
            return []  # each one new to the run or replaced: none kept
        # Those kept are still in their chunk (the others are in this one).
        kept: list[Record] = []
        for phones in _batches(recipients.phones):
            condition, args = self.sql.any_of("phone", phones)
            rows = await self.sql.fetch(
                f"SELECT {RECORD_COLUMNS} FROM campaignkit_recipients WHERE run = ? AND chunk <> ?"
                f" AND state NOT IN {_in(replace)} AND {condition}",
                *(run, chunk, *args),
            )
            kept += (Record(*row) for row in rows)
        return kept

    async def take(
        self, run: str, chunk: str, states: Collection[str], to: str, claim: str, now: float
    ) -> Recipients:
        rows = await self.sql.fetch(
            "UPDATE campaignkit_recipients SET state = ?, claim = ?, updated = ?"
            f" WHERE run = ? AND chunk = ?"
            f" AND (state IN {_in(states)} OR (state = ? AND claim = ?))"
            " RETURNING phone, position, user_wire",
            *(to, claim, now, run, chunk, to, claim),
        )
        rows.sort(key=itemgetter(1))  # in input order, as the request will carry them
        return Recipients([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])

    async def move(
        self,
        run: str,
        where: Where,
        to: str,
        now: float,
        fields: Mapping[str, str | None] | None = None,
    ) -> int:
        sets, args = _sets(fields or {}, _RECIPIENT_FIELDS)
        condition, more = f"run = ? AND state IN {_in(where.states)}", [run]
        if where.chunk is not None:
            condition, more = condition + " AND chunk = ?", [*more, where.chunk]
        column, values = (
            ("claim", where.claims) if where.phones is None else ("phone", where.phones)
        )
        moved = 0
        for batch in [None] if values is None else _batches(values):
            selected, chosen = ("1 = 1", ()) if batch is None else self.sql.any_of(column, batch)
            if column == "claim" and batch is not None:
                # Through the claims' chunks: the recipients' one secondary index.
                claims, more_claims = self.sql.any_of("claim", batch)
                selected = (
                    f"chunk IN (SELECT chunk FROM campaignkit_claims WHERE run = ? AND {claims})"
                    f" AND {selected}"
                )
                chosen = (run, *more_claims, *chosen)
            moved += await self.sql.execute(
                f"UPDATE campaignkit_recipients SET state = ?{sets}, updated = ?"
                f" WHERE {condition} AND {selected}",
                *(to, *args, now, *more, *chosen),
            )
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
                f"SELECT COUNT(DISTINCT r.phone), MIN(c.claimed){_TAKEN}"
                f" AND r.state IN {_in(states)}",
                since,
            )
        )[0]
        return int(used), None if oldest is None else float(oldest)

    async def counted_among(
        self, since: float, states: Collection[str], phones: Sequence[str]
    ) -> set[str]:
        counted: set[str] = set()
        for batch in _batches(phones):
            condition, args = self.sql.any_of("r.phone", batch)
            rows = await self.sql.fetch(
                f"SELECT DISTINCT r.phone{_TAKEN} AND r.state IN {_in(states)} AND {condition}",
                since,
                *args,
            )
            counted.update(row[0] for row in rows)
        return counted

    async def counts(self, run: str) -> dict[str, int]:
        rows = await self.sql.fetch(
            "SELECT state, COUNT(*) FROM campaignkit_recipients WHERE run = ? GROUP BY state", run
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
        for batch in _batches(phones):
            condition, args = self.sql.any_of("r.phone", batch)
            rows = await self.sql.fetch(
                "SELECT r.phone, r.position, r.state, r.launch_request_id, r.detail,"
                " r.user_wire, r.claim, c.claimed FROM campaignkit_recipients r"
                " LEFT JOIN campaignkit_claims c ON c.run = r.run AND c.claim = r.claim"
                f" WHERE r.run = ? AND {condition}",
                run,
                *args,
            )
            held.update((row[0], (Record(*row[:7]), row[7])) for row in rows)
        return held

    async def last_update(self, run: str) -> float | None:
        rows = await self.sql.fetch(
            "SELECT MAX(updated) FROM campaignkit_recipients WHERE run = ?", run
        )
        return None if rows[0][0] is None else float(rows[0][0])

    # -- sending lines

    async def lines_of(self, phones: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for batch in _batches(phones):
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
        for batch in _batches(phones):
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
        for batch in _batches(phones):
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
        await self.sql.executemany(_STATUS_UPSERT, map(add, repeat((run,)), rows))

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
        rows = await self.sql.fetch(
            f"SELECT launch_request_id, {self.sql.spaced('phone')} FROM campaignkit_recipients"
            " WHERE run = ? AND state = ? GROUP BY launch_request_id",
            *(run, state),
        )
        return {launch: joined.split(" ") for launch, joined in rows if launch in launches}

    async def outcomes(self, run: str) -> list[RecipientOutcome]:
        rows = await self.sql.fetch(
            f"SELECT {_OUTCOME} FROM campaignkit_outcomes WHERE run = ? ORDER BY phone", run
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
            " OR EXISTS (SELECT 1 FROM campaignkit_recipients r WHERE r.run = u.run"
            f" AND r.state IN {_in(states)})) ORDER BY u.created, u.run"
        )
        return [row[0] for row in rows]

    async def settled_recent(
        self, run: str, limit: int, final: Collection[str], failures: Collection[str]
    ) -> list[tuple[float, int, int]]:
        # The run's outcomes (its primary key's prefix) and its rejected
        # claims (their state's index): never a scan of its recipients.
        rows = await self.sql.fetch(
            "SELECT COALESCE(status_at, delivered_at),"
            f" CASE WHEN status IN {_in(failures)} THEN 1 ELSE 0 END"
            " FROM campaignkit_outcomes WHERE run = ?"
            f" AND (status IN {_in(final)} OR delivered_at IS NOT NULL)"
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
            " WHERE c.run = ? AND c.chunk = ? AND c.state = ? AND u.run <> c.run"
            f" AND r.run = u.run AND r.phone = c.phone AND r.state IN {_in(states)}"
            " AND r.updated >= ? AND NOT EXISTS (SELECT 1 FROM campaignkit_outcomes o"
            " WHERE o.run = r.run AND o.phone = r.phone AND o.replied_at >= r.updated)",
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


def _run_of(row: tuple[Any, ...]) -> RunInfo:
    name, poll, created, total, done, stopped = row[:6]
    reason, detail, paused, judged = row[7:11]
    pause = None if reason is None else RunPause(reason, detail, float(paused))
    judged = None if judged is None else float(judged)
    return RunInfo(name, poll, created, total, bool(done), stopped, pause, judged)
