"""The SQLite ledger: the embedded default of ``journal="run.db"``; its
store is the SQL one (:mod:`._sql`) over a connection to a file."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from itertools import chain
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from ..errors import LedgerError
from ._identity import LedgerNotFound, file_stamp
from ._ledger import DEFAULT_CLAIM_TTL, Ledger
from ._schema import Transaction, TransactionConflict
from ._sql import SqlStore

T = TypeVar("T")


COPY_ADVICE = (
    "Copy a ledger together with its -wal file (cp {path} {path}-wal DEST/), or, even "
    "while it is in use: sqlite3 {path} \".backup 'copy.db'\" && sqlite3 copy.db "
    "'DELETE FROM campaignkit_sessions'. If the -wal file is truly lost, the same DELETE "
    "on this file accepts it as it is (claims it forgot may be sent again)"
)


class SqliteLedger(Ledger):
    """A ledger in an SQLite file, which several processes of one machine may share.

    Durability: WAL mode with ``synchronous=FULL``, so a commit has reached
    the disk (fsync of the -wal file) before it returns; a claim is committed
    before its request leaves, and survives a ``kill -9`` or a power cut. A
    plan's and a settle's commits (``synchronous=NORMAL``) survive a
    ``kill -9`` at once, a power cut once the next claim's commit (which
    syncs them with it) or the file's close: a power cut may forget a
    settle, whose claim is then reported ambiguous, never sent again.
    Each transaction starts with ``BEGIN IMMEDIATE``, which takes the file's
    write lock at once: two processes' claims on one file are serialised, and
    a process waits up to ``busy_timeout`` seconds for the lock.

    The connection lives on one worker thread of its own, so the event loop
    never waits on the disk.

    Copies: while the file is in use (or after its last user was killed) the
    latest commits are in its ``-wal`` file only, so the file alone forgets
    claims. Each open is recorded in the file itself with the file's identity,
    and the last user to close it clears the records: a file that records a
    session of another file (it is a copy) and has no ``-wal`` beside it is
    refused, with the ways to copy a ledger (:data:`COPY_ADVICE`).

    ``create=False`` opens only a ledger that exists: a missing file (or one
    without a ledger in it) is :class:`~campaignkit.ledger.LedgerNotFound`,
    and nothing is created. A file deleted, or replaced by another, while
    the ledger is open fails its next transaction with
    :class:`~campaignkit.errors.LedgerError`.
    """

    store: SqliteStore

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        claim_ttl: float = DEFAULT_CLAIM_TTL,
        busy_timeout: float = 60.0,
        create: bool = True,
    ) -> None:
        store = SqliteStore(path, busy_timeout=busy_timeout, create=create)
        super().__init__(store, claim_ttl=claim_ttl)

    @property
    def path(self) -> str:
        """The file's path."""
        return self.store.path

    def __repr__(self) -> str:
        return f"SqliteLedger({self.path!r})"


class SqliteStore(SqlStore):
    """The SQL store over a connection to an SQLite file (see :class:`SqliteLedger`)."""

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 60.0, create: bool = True
    ) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.busy_timeout = busy_timeout
        self.create = create
        self._stamp = ""  # the file opened (see file_stamp)
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._session = uuid.uuid4().hex
        self._durable = True
        """Whether the connection's commits sync the write-ahead log (``synchronous=FULL``)."""
        self.reads_json = False
        """Whether the connection's SQLite reads JSON (``json_each``: built in since 3.38)."""

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._queue(fn, *args)

    def _queue(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)``, queued for the thread: it runs calls in turn."""
        assert self._executor is not None
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._executor, self._checked, fn, *args)

    def _checked(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, in the ledger's thread, an SQLite error raised as a LedgerError."""
        try:
            return fn(*args)
        except sqlite3.Error as exc:
            raise LedgerError(f"the ledger {self.path!r} failed: {exc}") from exc

    async def _connect(self) -> None:
        if self._conn is not None:
            return
        executor = self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="campaignkit-ledger"
        )
        self._lock = asyncio.Lock()
        # Shielded: cancelled while the thread opens the file, the connection it
        # opens is still ended (with its session), not left to the collector.
        opening = asyncio.ensure_future(self._call(self._open_file))
        try:
            self._conn = await asyncio.shield(opening)
        except BaseException:
            opening.add_done_callback(functools.partial(self._abandon, executor))
            raise

    def _abandon(
        self,
        executor: concurrent.futures.ThreadPoolExecutor,
        opening: asyncio.Future[sqlite3.Connection],
    ) -> None:
        """End the thread of an abandoned opening and, in another thread (the
        ledger may be closed by now), the connection it opened."""
        if not opening.cancelled() and opening.exception() is None:
            asyncio.get_running_loop().run_in_executor(None, self._close_file, opening.result())
        executor.shutdown(wait=False)
        if self._executor is executor:
            self._executor = None

    def _wal_mode(self, conn: sqlite3.Connection) -> str:
        """Switch the file to WAL (once: the mode is kept in the file).

        The switch needs the file to itself, and SQLite answers "database is
        locked" at once, without its busy timeout, while another process
        opens the same new file: so wait here, up to ``busy_timeout``.
        """
        deadline = time.monotonic() + self.busy_timeout
        while True:
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
            if mode.lower() == "wal":
                return mode
            try:
                return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _open_file(self) -> sqlite3.Connection:
        wal_present = os.path.exists(f"{self.path}-wal")
        # mode=rw: SQLite itself refuses a missing file, instead of creating it.
        target = self.path if self.create else f"{Path(self.path).absolute().as_uri()}?mode=rw"
        try:
            conn = sqlite3.connect(
                target,
                isolation_level=None,
                timeout=self.busy_timeout,
                check_same_thread=False,
                uri=not self.create,
            )
        except sqlite3.Error as exc:
            if not self.create and not os.path.exists(self.path):
                raise self._not_found("the file does not exist") from None
            raise LedgerError(f"cannot open the ledger {self.path!r}: {exc}") from exc
        try:
            if not self.create and not self._holds_ledger(conn):
                raise self._not_found("the file holds no campaignkit ledger")
            mode = self._wal_mode(conn)
            if str(mode).lower() != "wal":
                raise LedgerError(f"the ledger {self.path!r} cannot use WAL mode ({mode})")
            conn.execute("PRAGMA synchronous=FULL")
            self._durable = True
            self.reads_json = _reads_json(conn)
            self._open_session(conn, wal_present)
            legacy = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'chunks'"
            ).fetchone()
            if legacy and conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone():
                raise LedgerError(
                    f"{self.path!r} is a chunk journal of campaignkit before the delivery "
                    "ledger: it does not name its recipients, so resuming from it could "
                    "message people twice. Finish that run with the campaignkit that wrote "
                    "it, or start a new journal file"
                )
        except BaseException:
            conn.close()
            raise
        return conn

    def _not_found(self, why: str) -> LedgerNotFound:
        return LedgerNotFound(
            f"no ledger at {self.path!r}: {why} (a mistyped path? a run sent from another "
            "directory?); nothing was created"
        )

    @staticmethod
    def _holds_ledger(conn: sqlite3.Connection) -> bool:
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'campaignkit_schema'"
            ).fetchone()
        except sqlite3.DatabaseError:  # not an SQLite file at all
            return False
        return found is not None

    def _open_session(self, conn: sqlite3.Connection, wal_present: bool) -> None:
        """Refuse a copy made without the ``-wal`` file; record this open.

        A session names the file it was opened on (device and inode): one
        recorded for another file came with a copy, which is complete only
        with the ``-wal`` file of its time.
        """
        this_file = self._stamp = file_stamp(self.path)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS campaignkit_sessions (session TEXT PRIMARY KEY,"
            " file TEXT NOT NULL, opened DOUBLE PRECISION NOT NULL)"
        )
        copied = conn.execute(
            "SELECT 1 FROM campaignkit_sessions WHERE file <> ? LIMIT 1", (this_file,)
        ).fetchone()
        if copied and not wal_present:
            raise LedgerError(
                f"the ledger {self.path!r} is a copy of a ledger that was in use (or whose "
                f"last user was killed), made without its write-ahead log ({self.path}-wal): "
                "the latest claims are there, so resuming from this file could message "
                "people twice. " + COPY_ADVICE.format(path=self.path)
            )
        conn.execute(
            "INSERT INTO campaignkit_sessions (session, file, opened) VALUES (?, ?, ?)",
            (self._session, this_file, time.time()),
        )
        # Into the main file too, so that a copy of it alone says it was in use.
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _close_file(self, conn: sqlite3.Connection) -> None:
        """End this session; the last one out leaves a file complete on its own.

        Leaving WAL mode needs the file to itself: when that works, every
        commit is in the main file and the sessions recorded are over (of
        processes that were killed, if not this one): they are cleared, and
        the file goes back to WAL mode for its next user.
        """
        try:
            conn.execute("DELETE FROM campaignkit_sessions WHERE session = ?", (self._session,))
            conn.execute("PRAGMA busy_timeout = 0")
            if str(conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]).lower() == "delete":
                conn.execute("DELETE FROM campaignkit_sessions")
                conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error:
            pass  # another process has the file open: its -wal holds the truth
        finally:
            conn.close()

    async def _lock_schema(self, tx: Transaction) -> None:
        """Nothing to do: ``BEGIN IMMEDIATE`` already holds the file's write lock."""

    async def aclose(self) -> None:
        executor, conn = self._executor, self._conn
        self._executor = self._conn = None
        if executor is None:
            return
        try:
            if conn is not None:
                await asyncio.shield(
                    asyncio.get_running_loop().run_in_executor(executor, self._close_file, conn)
                )
        finally:
            executor.shutdown(wait=False)

    @asynccontextmanager
    async def connection(self, *, durable: bool = True) -> AsyncIterator[Transaction]:
        if self._conn is None or self._lock is None:
            raise LedgerError(f"the ledger {self.path!r} is not open")
        lock = self._lock
        await lock.acquire()
        # Begun by its first statement, in the same call to the thread: a
        # call less a transaction, each a wait for the thread and the loop.
        tx = _SqliteTransaction(self, lock, durable)
        try:
            yield tx
        except BaseException:
            # Shielded: a cancelled caller must still leave the file unlocked.
            # Cancelled while the thread ran a statement (the first one begins
            # the transaction), the transaction is open all the same: ended
            # there (after the statement: the thread is one), or every later
            # transaction would fail to begin.
            if not tx.handed_over:
                await asyncio.shield(self._call(self._rollback_open, self._conn))
            raise
        else:
            if tx.begun and not tx.handed_over:
                await asyncio.shield(self._commit())
        finally:
            if not tx.handed_over:
                lock.release()

    @staticmethod
    def _rollback_open(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def _begin(self, conn: sqlite3.Connection, durable: bool) -> None:
        """``BEGIN IMMEDIATE``, on the file opened only (a stat: microseconds);
        not ``durable``, its commit will not sync the write-ahead log (the
        next durable one syncs it, this one's with it).

        A connection keeps the file it opened: deleted or replaced under it,
        its writes would go where nobody reads them, and a rerun would find
        a ledger without the run and send everyone again.
        """
        try:
            stamp = file_stamp(self.path)
        except FileNotFoundError:
            raise LedgerError(
                f"the ledger file {self.path!r} was deleted while in use: stopped, nothing "
                "more is sent from it (its runs' records went with it)"
            ) from None
        if stamp != self._stamp:
            raise LedgerError(
                f"the ledger file {self.path!r} was replaced while in use (another file is in "
                "its place): stopped, nothing more is sent from it"
            )
        if durable != self._durable:  # a level is set between transactions only
            conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
            self._durable = durable
        conn.execute("BEGIN IMMEDIATE")

    async def _commit(self) -> None:
        assert self._conn is not None
        await self._call(self._end, self._conn)

    @staticmethod
    def _end(conn: sqlite3.Connection) -> None:
        """``COMMIT`` (in the thread)."""
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:
            # A failed COMMIT may leave the transaction open: end it, or the
            # next BEGIN would fail too.
            SqliteStore._rollback_open(conn)
            raise


class _SqliteTransaction:
    locking = ""  # BEGIN IMMEDIATE holds the file's write lock

    def __init__(self, ledger: SqliteStore, lock: asyncio.Lock, durable: bool) -> None:
        self._ledger = ledger
        self._durable = durable
        assert ledger._conn is not None
        self._conn = ledger._conn
        self._lock = lock
        self.handed_over = False
        """Whether a body run at once was handed to the thread whole, to end
        the transaction there (and the ledger's lock released)."""
        self.begun = False
        """Whether a statement began the transaction (``BEGIN IMMEDIATE``) and
        nothing has ended it yet."""
        self._in_thread = False
        """Whether a body run at once is running (in the thread): its
        statements run where they are called."""
        self._abandoned = False
        """Whether the caller of a body run at once was cancelled meanwhile."""

    def _begin(self) -> None:
        """Begin the transaction, before its first statement (in the thread)."""
        if not self.begun:
            self._ledger._begin(self._conn, self._durable)
            self.begun = True

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the thread: here and now within a body run at once."""
        if self._in_thread:
            return self._ledger._checked(fn, *args)
        return await self._ledger._call(fn, *args)

    async def at_once(self, body: Callable[[], Coroutine[Any, Any, T]]) -> T:
        # One call to the thread for the whole transaction, its end with it: a
        # call a statement is a wait for the thread and one for the loop, each
        # as long as the other's work in hand, with the file's write lock held
        # (benchmarks, row 17). Once queued, it runs before whatever is queued
        # after it: the next transaction may queue its own at once, not once
        # this one's answer is back, and the thread goes from one to the next.
        answer: asyncio.Future[T] = self._ledger._queue(self._run_at_once, body)
        self.handed_over = True
        self._lock.release()
        try:
            return await answer
        except asyncio.CancelledError:
            # The thread runs on, and rolls the transaction back rather than
            # commit it (unless its COMMIT has begun).
            self._abandoned = True
            raise

    def _run_at_once(self, body: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``body`` and end the transaction: committed, or rolled back
        (``body`` raised, or its caller was cancelled meanwhile)."""
        self._in_thread = True
        try:
            result = _finish(body())
        except BaseException:
            self._ledger._rollback_open(self._conn)
            raise
        finally:
            self._in_thread = False
        if self._abandoned:
            self._ledger._rollback_open(self._conn)
        elif self.begun:
            self._ledger._end(self._conn)
        self.begun = False
        return result

    async def execute(self, sql: str, *args: Any) -> int:
        return await self._run(self._execute, sql, args)

    def _execute(self, sql: str, args: tuple[Any, ...]) -> int:
        self._begin()
        return self._conn.execute(sql, args).rowcount

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        return await self._run(self._executemany, sql, rows)

    def _executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        self._begin()
        return self._conn.executemany(sql, rows).rowcount

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return await self._run(self._fetch, sql, args)

    def _fetch(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        self._begin()
        return self._conn.execute(sql, args).fetchall()

    async def insert(
        self,
        table: str,
        fixed: Sequence[tuple[str, str, Any]],
        columns: Sequence[tuple[str, str, Sequence[Any]]],
        then: str | None,
    ) -> int:
        names = ", ".join(name for name, _, _ in (*fixed, *columns))
        constants = [value for _, _, value in fixed]
        rows = list(zip(*(values for _, _, values in columns), strict=True))
        into = f"INSERT INTO {table} ({names})"
        return await self._run(self._insert, into, constants, rows, then or "")

    def _insert(
        self, into: str, constants: list[Any], rows: list[tuple[Any, ...]], then: str
    ) -> int:
        self._begin()
        if not rows:
            return 0
        # One statement of many rows, a third faster than a statement a row;
        # the constants bound once, beside the rows' values (a VALUES list):
        # binding is most of a plan's time in the thread, with the GIL held
        # (benchmarks, row 17). Plain placeholders: numbered ones (?1) must be
        # bound by name from 3.12 on, three times slower. WHERE true: without
        # it, SQLite would read the ON of ON CONFLICT as a join's.
        width = len(rows[0])
        limit = self._conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        per = max(1, (limit - len(constants)) // width)
        selected = ", ".join(["?"] * len(constants) + [f"column{n}" for n in range(1, width + 1)])
        changed = 0
        for start in range(0, len(rows), per):
            batch = rows[start : start + per]
            args = [*constants, *chain.from_iterable(batch)]
            values = _rows_of(width, len(batch))
            statement = f"{into} SELECT {selected} FROM (VALUES {values}) WHERE true {then}"
            try:
                changed += self._conn.execute(statement, args).rowcount
            except sqlite3.IntegrityError as exc:
                if then or "UNIQUE" not in str(exc):
                    raise
                # New rows met a key held: as insert() says, a conflict.
                raise TransactionConflict(f"rows taken for new are held already: {exc}") from exc
        return changed

    def spaced(self, column: str) -> str:
        return f"group_concat({column}, ' ')"

    async def columns(self, table: str) -> set[str]:
        return {row[0] for row in await self.fetch("SELECT name FROM pragma_table_info(?)", table)}

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
        if not values:
            return "0 = 1", ()
        if len(values) > _BOUND_APART and self._ledger.reads_json:
            # A long list as one JSON text, read in SQLite's C with the GIL
            # free: a value bound apart each holds it (a plan's lookup of a
            # chunk's numbers in the suppression list: benchmarks, row 16).
            return f"{column} IN (SELECT value FROM json_each(?))", (orjson.dumps(values).decode(),)
        return f"{column} IN ({', '.join('?' * len(values))})", tuple(values)


_BOUND_APART: Final = 16
"""The most values an ``IN`` list binds one by one."""


def _reads_json(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT value FROM json_each('[]')").fetchall()
    except sqlite3.OperationalError:
        return False
    return True


def _finish(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end, here and now: it awaits only statements run at once."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("a body run at once awaited something other than its statements")


@functools.lru_cache(maxsize=16)
def _rows_of(width: int, count: int) -> str:
    """``count`` rows of ``width`` placeholders, as a VALUES clause takes them."""
    return ", ".join(["(" + ", ".join("?" * width) + ")"] * count)
