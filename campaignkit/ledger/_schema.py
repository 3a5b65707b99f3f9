"""The ledger's tables, in SQL that SQLite and PostgreSQL both run, the
:class:`Transaction` a dialect hands the SQL store, and the retries of a
ledger's operations."""

from __future__ import annotations

from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from typing import Any, Final, ParamSpec, Protocol, TypeVar, cast

import tenacity

from .._redaction import sdk_logger
from ..errors import LedgerError
from ._outcomes import OUTCOME_TABLES

T = TypeVar("T")


class Transaction(Protocol):
    """A transaction of an SQL connection, as a dialect hands it to :mod:`._sql`."""

    async def execute(self, sql: str, *args: Any) -> int:
        """Run ``sql``; how many rows it changed."""
        ...

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> int | None:
        """Run ``sql`` for each of ``rows``; how many rows it changed in all,
        None where the driver does not say."""
        ...

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]: ...
    async def insert(
        self,
        table: str,
        fixed: Sequence[tuple[str, str, Any]],
        columns: Sequence[tuple[str, str, Sequence[Any]]],
        then: str | None,
    ) -> int:
        """Insert rows into ``table``: the ``fixed`` columns (name, SQL type,
        one value for every row), then ``columns`` (name, SQL type, a value a
        row); ``then`` an ``ON CONFLICT`` clause, or None for rows new to the
        table (a key held already, by a writer unseen when they were read,
        fails the transaction: :class:`TransactionConflict`, run again). In
        as few statements as the dialect allows (one a chunk, not one a row,
        PostgreSQL's ``COPY`` for new rows); how many rows it changed."""
        ...

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        """``column IN (...)`` for ``values``: the SQL and its arguments."""
        ...

    async def at_once(self, body: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``await body()``, whose statements are the rest of the transaction
        (see :meth:`~._store.StoreTx.at_once`); committed with it where the
        dialect runs it elsewhere (SQLite: in its thread)."""
        ...

    def spaced(self, column: str) -> str:
        """The aggregate of a group's ``column`` values joined by spaces."""
        ...

    async def columns(self, table: str) -> set[str]:
        """The names of ``table``'s columns."""
        ...

    locking: str
    """What ends a ``SELECT`` that locks the rows it reads of its first
    table (``k``) against writers to the end of the transaction (empty
    where the transaction holds the database's write lock already)."""


P = ParamSpec("P")

SCHEMA_VERSION: Final = 4
"""2: people keyed by their :class:`~campaignkit.Phone` (ledgers of version
1 are re-keyed when opened). 3: a claim's state kept by its chunk and its
claim, not by each recipient (see :mod:`._sql_tx`): an older campaignkit
would take a claimed chunk's recipients for planned, so it refuses it. 4: a
claim's row keeps the input positions it took (a report reads them there)."""

ADDED_COLUMNS: Final = (
    ("campaignkit_chunks", "claim TEXT"),
    ("campaignkit_claims", "launch_request_id TEXT"),
    ("campaignkit_claims", "updated DOUBLE PRECISION"),
    ("campaignkit_claims", "positions TEXT"),
)
"""The columns of versions 3 and 4, added to an older ledger's tables when it is opened."""

BATCH: Final = 5000
"""The most values one ``IN`` list carries (SQLite allows 32,766 variables)."""


def in_list(values: Collection[str], *, quoted: bool = False) -> str:
    """``IN`` of literal states (never a caller's text: the ledger's
    constants), or of any texts ``quoted`` (none: a list matching no name)."""
    texts = [value.replace("'", "''") for value in values] if quoted else list(values)
    return "(" + ", ".join(f"'{text}'" for text in texts or [""]) + ")"


def set_clause(fields: Mapping[str, Any], allowed: frozenset[str]) -> tuple[str, list[Any]]:
    """``column = ?`` for each of ``fields``, each after a comma, and their values."""
    if not fields.keys() <= allowed:
        raise ValueError(f"not columns a store sets: {sorted(fields.keys() - allowed)}")
    return "".join(f", {name} = ?" for name in fields), list(fields.values())


def batches(values: Sequence[Any]) -> list[list[Any]]:
    """``values`` in lists of at most :data:`BATCH` (one, empty, if there are none)."""
    return [list(values[start : start + BATCH]) for start in range(0, len(values), BATCH)] or [[]]


SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS campaignkit_schema (version INTEGER NOT NULL)",
    # Which ledger this is (see ._identity): one row, written when it is created.
    "CREATE TABLE IF NOT EXISTS campaignkit_ledger"
    " (identity TEXT PRIMARY KEY, created DOUBLE PRECISION NOT NULL)",
    """CREATE TABLE IF NOT EXISTS campaignkit_runs (
        run TEXT PRIMARY KEY,
        poll TEXT NOT NULL,
        created DOUBLE PRECISION NOT NULL,
        total BIGINT,
        input_done INTEGER NOT NULL DEFAULT 0,
        input_pass TEXT NOT NULL DEFAULT ''
    )""",
    # A table of its own, not a column of the runs': ledgers made before it
    # gain it when they are opened.
    """CREATE TABLE IF NOT EXISTS campaignkit_run_stops (
        run TEXT PRIMARY KEY,
        detail TEXT NOT NULL,
        stopped DOUBLE PRECISION NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS campaignkit_recipients (
        run TEXT NOT NULL,
        phone TEXT NOT NULL,
        position BIGINT NOT NULL,
        chunk TEXT NOT NULL,
        state TEXT NOT NULL,
        claim TEXT,
        user_wire TEXT NOT NULL,
        launch_request_id TEXT,
        detail TEXT,
        updated DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (run, phone)
    )""",
    # One secondary index, of what never moves: a plan writes its entries, a
    # claim or a settle (a change of state) none. A claim's recipients are
    # found through its chunk (see ._sql); an older ledger's index holding
    # the state, rewritten at each move, is replaced when it is opened.
    "DROP INDEX IF EXISTS campaignkit_recipients_chunk",
    "CREATE INDEX IF NOT EXISTS campaignkit_recipients_run_chunk"
    " ON campaignkit_recipients (run, chunk)",
    # The rows not planned, few of a run (a claim writes no recipient): what a
    # report reads of each recipient, beside its claims' (see ._sql_held).
    "CREATE INDEX IF NOT EXISTS campaignkit_recipients_unplanned"
    " ON campaignkit_recipients (run, state) WHERE state <> 'planned'",
    "DROP INDEX IF EXISTS campaignkit_recipients_claim",
    "DROP INDEX IF EXISTS campaignkit_recipients_state",
    """CREATE TABLE IF NOT EXISTS campaignkit_claims (
        run TEXT NOT NULL,
        claim TEXT NOT NULL,
        chunk TEXT NOT NULL,
        owner TEXT NOT NULL,
        size BIGINT NOT NULL,
        claimed DOUBLE PRECISION NOT NULL,
        expires DOUBLE PRECISION NOT NULL,
        state TEXT NOT NULL,
        ack TEXT,
        detail TEXT,
        launch_request_id TEXT,
        updated DOUBLE PRECISION,
        positions TEXT,
        PRIMARY KEY (run, claim)
    )""",
    "CREATE INDEX IF NOT EXISTS campaignkit_claims_state ON campaignkit_claims (run, state)",
    # A planned recipient's state is its chunk's claim's, if one holds it (see ._sql_tx).
    "CREATE INDEX IF NOT EXISTS campaignkit_claims_chunk ON campaignkit_claims (run, chunk)",
    """CREATE TABLE IF NOT EXISTS campaignkit_chunks (
        run TEXT NOT NULL,
        chunk TEXT NOT NULL,
        size BIGINT NOT NULL,
        enqueued INTEGER NOT NULL DEFAULT 0,
        created DOUBLE PRECISION NOT NULL,
        claim TEXT,
        PRIMARY KEY (run, chunk)
    )""",
    """CREATE TABLE IF NOT EXISTS campaignkit_skipped (
        run TEXT NOT NULL,
        input_pass TEXT NOT NULL,
        position BIGINT NOT NULL,
        kind TEXT NOT NULL,
        phone TEXT,
        reason TEXT,
        line BIGINT,
        item TEXT,
        PRIMARY KEY (run, input_pass, position)
    )""",
    """CREATE TABLE IF NOT EXISTS campaignkit_seen (
        namespace TEXT NOT NULL,
        key TEXT NOT NULL,
        seen DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (namespace, key)
    )""",
    """CREATE TABLE IF NOT EXISTS campaignkit_suppressions (
        phone TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        source TEXT,
        added DOUBLE PRECISION NOT NULL
    )""",
    # A claim looks its chunk's recipients up only when a number was listed
    # since the chunk was made (see ._sql): found through this index.
    "CREATE INDEX IF NOT EXISTS campaignkit_suppressions_added ON campaignkit_suppressions (added)",
    *OUTCOME_TABLES,
    """CREATE TABLE IF NOT EXISTS campaignkit_run_options (
        run TEXT PRIMARY KEY,
        options TEXT NOT NULL,
        saved DOUBLE PRECISION NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS campaignkit_lines (
        phone TEXT PRIMARY KEY,
        line TEXT NOT NULL,
        assigned DOUBLE PRECISION NOT NULL
    )""",
    # The people on each line, kept beside campaignkit_lines so that a new
    # person's line is chosen without counting everyone ever assigned.
    """CREATE TABLE IF NOT EXISTS campaignkit_line_load (
        line TEXT PRIMARY KEY,
        people INTEGER NOT NULL
    )""",
    # One row per rule that needs every claimer of the ledger in turn; the
    # row's lock is held to the end of the transaction (SQLite's BEGIN
    # IMMEDIATE already serialises writers).
    """CREATE TABLE IF NOT EXISTS campaignkit_locks (
        name TEXT PRIMARY KEY,
        taken DOUBLE PRECISION NOT NULL
    )""",
    # The runs a guard (or a person) paused: a claim of a run found here
    # takes nothing. Beside the runs' table, as its stops are.
    """CREATE TABLE IF NOT EXISTS campaignkit_run_pauses (
        run TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        detail TEXT NOT NULL,
        paused DOUBLE PRECISION NOT NULL
    )""",
    # The runs whose canary was taken to judgement: a later send of the run
    # never gates it again, however it was stopped before a verdict.
    """CREATE TABLE IF NOT EXISTS campaignkit_run_canaries (
        run TEXT PRIMARY KEY,
        judged DOUBLE PRECISION NOT NULL
    )""",
)


RUN_COLUMNS: Final = (
    "r.run, r.poll, r.created, r.total, r.input_done, s.detail, r.input_pass,"
    " p.reason, p.detail, p.paused, c.judged"
)
RUN_JOINS: Final = (
    " LEFT JOIN campaignkit_run_stops s ON s.run = r.run"
    " LEFT JOIN campaignkit_run_pauses p ON p.run = r.run"
    " LEFT JOIN campaignkit_run_canaries c ON c.run = r.run"
)
RUNS: Final = f"SELECT {RUN_COLUMNS} FROM campaignkit_runs r{RUN_JOINS}"
"""A run as :meth:`~._records.RunInfo.of_row` reads it: its row, stop, pause
and canary (and its input pass, beside them)."""


class TransactionConflict(LedgerError):
    """The database chose this transaction to fail (a deadlock between
    concurrent writers, a serialisation failure): it is run again."""


class LedgerUnavailable(LedgerError):
    """The connection to the ledger's server was lost or refused (a restart,
    a failover, a terminated session): the operation is run again once it
    is back, for up to the ledger's ``reconnect_timeout`` seconds."""


log = sdk_logger("campaignkit.ledger")

_CONFLICT_ATTEMPTS: Final = 6
_WAIT_CONFLICT = tenacity.wait_random_exponential(multiplier=0.01, max=0.5)
_WAIT_RECONNECT = tenacity.wait_random_exponential(multiplier=0.1, max=5.0)


def _lost(state: tenacity.RetryCallState) -> LedgerError | None:
    exc = state.outcome.exception() if state.outcome is not None else None
    return exc if isinstance(exc, LedgerUnavailable) else None


def _stop(state: tenacity.RetryCallState) -> bool:
    if _lost(state) is not None:
        patience: float = getattr(state.args[0], "reconnect_timeout", 0.0)
        return (state.seconds_since_start or 0.0) >= patience
    return state.attempt_number >= _CONFLICT_ATTEMPTS


def _wait(state: tenacity.RetryCallState) -> float:
    return (_WAIT_RECONNECT if _lost(state) is not None else _WAIT_CONFLICT)(state)


def _log_reconnect(state: tenacity.RetryCallState) -> None:
    if (exc := _lost(state)) is not None and state.next_action is not None:
        log.warning(
            "%s: reconnecting in %.1f s (attempt %d)",
            exc,
            state.next_action.sleep,
            state.attempt_number,
        )


# A write whose transaction lost a conflict, or whose connection was lost, is
# run again after a jittered pause: it was rolled back whole, or (a connection
# lost during COMMIT) committed, and every retried operation is idempotent.
_retrying = tenacity.retry(
    retry=tenacity.retry_if_exception_type((TransactionConflict, LedgerUnavailable)),
    stop=_stop,
    wait=_wait,
    before_sleep=_log_reconnect,
    reraise=True,
)


def retried(
    operation: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """A ledger's ``operation`` (its first argument the ledger: its
    ``reconnect_timeout``), run again after a lost conflict or connection;
    its signature kept for type checkers."""
    return cast("Callable[P, Coroutine[Any, Any, T]]", _retrying(operation))
