"""The PostgreSQL ledger (asyncpg, extra ``workers``): one ledger for many
processes and machines."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import LedgerError
from ._identity import LedgerNotFound
from ._ledger import DEFAULT_CLAIM_TTL, Ledger
from ._schema import LedgerUnavailable, Transaction, TransactionConflict
from ._sql import SqlStore

if TYPE_CHECKING:
    import asyncpg

T = TypeVar("T")

# Any fixed number: it names the lock that serialises schema creation.
_SCHEMA_LOCK = 0x63616D70
# A password in the user part (user:pw@host) or as a query parameter, written
# as a pattern so that even a malformed DSN is redacted, never raised on.
_PASSWORD = re.compile(r"(?<=://)([^:/@?]*):[^/?]*@|(?<=[?&])password=[^&]*", re.IGNORECASE)


def redact_dsn(dsn: str) -> str:
    """``dsn`` without its password."""
    return _PASSWORD.sub(
        lambda m: "password=***" if m.group(1) is None else f"{m.group(1)}:***@", dsn
    )


@lru_cache(maxsize=256)
def _numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1, $2, ...``."""
    counter = iter(range(1, 10_000))
    return re.sub(r"\?", lambda _: f"${next(counter)}", sql)


class PostgresLedger(Ledger):
    """A ledger in PostgreSQL, shared by every producer and worker of a run.

    Each operation is one transaction on a pooled connection; a claim locks
    its chunk's row, which makes it atomic between any number of workers.
    Commits are durable as PostgreSQL's ``synchronous_commit`` makes them (on
    by default), but for a plan's and a settle's (``synchronous_commit =
    off`` for them: kept by the server at once, made durable by the next
    durable commit, a claim's, or within ``wal_writer_delay``). The schema is created
    on first use under an advisory lock; with ``create=False`` a database
    whose schema (the first of its ``search_path``) holds no ledger is
    :class:`~campaignkit.ledger.LedgerNotFound`, and nothing is created.
    """

    store: PostgresStore

    def __init__(
        self,
        dsn: str,
        *,
        claim_ttl: float = DEFAULT_CLAIM_TTL,
        min_size: int = 1,
        max_size: int = 4,
        create: bool = True,
    ) -> None:
        store = PostgresStore(dsn, min_size=min_size, max_size=max_size, create=create)
        super().__init__(store, claim_ttl=claim_ttl)

    @property
    def dsn(self) -> str:
        """The database's DSN (its password is never in a repr or an error)."""
        return self.store.dsn

    def __repr__(self) -> str:
        return f"PostgresLedger({redact_dsn(self.dsn)!r})"


class PostgresStore(SqlStore):
    """The SQL store over a pool of PostgreSQL connections (see :class:`PostgresLedger`)."""

    def __init__(
        self, dsn: str, *, min_size: int = 1, max_size: int = 4, create: bool = True
    ) -> None:
        super().__init__()
        self.dsn = dsn
        self.create = create
        self._sizes = (min_size, max_size)
        self._pool: asyncpg.Pool | None = None

    async def _connect(self) -> None:
        if self._pool is not None:
            return
        try:
            import asyncpg
        except ImportError:
            raise LedgerError(
                "PostgresLedger needs asyncpg: pip install 'campaignkit[workers]'"
            ) from None
        try:
            self._pool = await asyncpg.create_pool(
                self.dsn, min_size=self._sizes[0], max_size=self._sizes[1], reset=_keep_session
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
            raise LedgerError(
                f"cannot connect to the ledger {redact_dsn(self.dsn)}: {type(exc).__name__}: "
                f"{str(exc).replace(self.dsn, redact_dsn(self.dsn))}"
            ) from None
        if not self.create:
            try:
                await self._refuse_missing(self._pool)
            except BaseException:  # nothing to open: its connections are closed
                await self.aclose()
                raise

    async def _refuse_missing(self, pool: asyncpg.Pool) -> None:
        import asyncpg

        try:
            schema, found = await pool.fetchrow(
                "SELECT current_schema(), to_regclass('campaignkit_schema') IS NOT NULL"
            )
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise self._failed(LedgerError, exc) from None
        if not found:
            where = (
                "no schema of its search_path exists"
                if schema is None
                else (f"its schema {schema!r} holds no campaignkit tables")
            )
            raise LedgerNotFound(
                f"no ledger in {redact_dsn(self.dsn)}: {where} (a mistyped database or "
                "search_path?); nothing was created"
            )

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def _lock_schema(self, tx: Transaction) -> None:
        await tx.execute(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK})")

    @asynccontextmanager
    async def connection(self, *, durable: bool = True) -> AsyncIterator[Transaction]:
        import asyncpg

        if self._pool is None:
            raise LedgerError(f"the ledger {redact_dsn(self.dsn)} is not open")
        pool = self._pool
        errors = (
            OSError,
            asyncpg.PostgresError,
            asyncpg.InterfaceError,
            asyncpg.InternalClientError,
        )
        try:
            conn = await pool.acquire()
        except errors as exc:
            raise self._failed(LedgerUnavailable if _lost(exc) else LedgerError, exc) from exc
        try:
            async with conn.transaction():
                if not durable:
                    await conn.execute("SET LOCAL synchronous_commit TO OFF")
                yield _PostgresTransaction(conn)
        except (
            asyncpg.DeadlockDetectedError,
            asyncpg.SerializationError,
            asyncpg.UniqueViolationError,  # new rows met a writer's unseen (see insert)
        ) as exc:
            raise TransactionConflict(f"the ledger's transaction lost a conflict: {exc}") from exc
        except errors as exc:
            raise self._failed(LedgerUnavailable if _lost(exc) else LedgerError, exc) from exc
        finally:
            # The transaction's outcome is known by now: a connection that
            # cannot be reset for the next one is the pool's to drop, not an error.
            with contextlib.suppress(Exception):
                await pool.release(conn)

    def _failed(self, kind: type[LedgerError], exc: BaseException) -> LedgerError:
        return kind(f"the ledger {redact_dsn(self.dsn)} failed: {type(exc).__name__}: {exc}")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Reset nothing more of a connection back in the pool than asyncpg
    always does (end a transaction left open): the ledger sets no session
    state (its locks are its transactions', it keeps no cursor and listens
    to nothing), and the default reset costs a round trip a transaction."""


# asyncpg's words for a connection the server closed under a transaction (its
# proxy is detached from the pool, its protocol left mid-operation): it has no
# exception class for these.
_CLOSED = re.compile(r"connection (is|was) closed|released back to the pool|cannot switch to state")


def _lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` says the server went away or refused us (the operation
    may be run again on a new connection). The server's own error may hide
    behind the InterfaceError of ending the transaction on the connection
    it closed: the chain is searched."""
    from asyncpg import exceptions as pg

    lost = (
        OSError,  # refused, reset, timed out
        pg.ConnectionDoesNotExistError,
        pg.PostgresConnectionError,
        pg.AdminShutdownError,  # pg_terminate_backend, a fast shutdown
        pg.CrashShutdownError,
        pg.CannotConnectNowError,  # starting up, in recovery
        pg.TooManyConnectionsError,
    )
    for _ in range(8):  # a chain may loop
        if exc is None:
            return False
        if isinstance(exc, lost) or (
            isinstance(exc, pg.InterfaceError | pg.InternalClientError) and _CLOSED.search(str(exc))
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class _PostgresTransaction:
    locking = " FOR SHARE OF k"

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def execute(self, sql: str, *args: Any) -> int:
        status: str = await self._conn.execute(_numbered(sql), *args)
        count = status.rpartition(" ")[2]  # "UPDATE 3", "INSERT 0 1"
        return int(count) if count.isdigit() else 0

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        await self._conn.executemany(_numbered(sql), rows)  # asyncpg does not count

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in await self._conn.fetch(_numbered(sql), *args)]

    async def insert(
        self,
        table: str,
        fixed: Sequence[tuple[str, str, Any]],
        columns: Sequence[tuple[str, str, Sequence[Any]]],
        then: str | None,
    ) -> int:
        names = [name for name, _, _ in (*fixed, *columns)]
        if then is None:
            # New rows: COPY, a third of the server's time of an INSERT
            # (benchmarks, row 17); a key held already is a unique violation,
            # a conflict that runs the operation again.
            constants = tuple(value for _, _, value in fixed)
            rows = zip(*(values for _, _, values in columns), strict=True)
            status: str = await self._conn.copy_records_to_table(
                table, records=[constants + row for row in rows], columns=names
            )
            return int(status.rpartition(" ")[2])
        # One statement whose rows come as an array a column: a statement a
        # row (executemany) costs the server a third more. The constants are
        # given once, not in an array each (asyncpg checks every element).
        constants_sql = ", ".join(f"?::{kind}" for _, kind, _ in fixed)
        arrays = ", ".join(f"?::{kind}[]" for _, kind, _ in columns)
        return await self.execute(
            f"INSERT INTO {table} ({', '.join(names)})"
            f" SELECT {constants_sql}, * FROM unnest({arrays}) {then}",
            *(value for _, _, value in fixed),
            *(list(values) for _, _, values in columns),
        )

    def spaced(self, column: str) -> str:
        return f"string_agg({column}, ' ')"

    async def columns(self, table: str) -> set[str]:
        rows = await self.fetch(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ?",
            table,
        )
        return {row[0] for row in rows}

    async def at_once(self, body: Callable[[], Coroutine[Any, Any, T]]) -> T:
        return await body()

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        return f"{column} = ANY(?)", (list(values),)
