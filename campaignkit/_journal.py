"""The journal of a bulk send: each chunk's state in an SQLite file, so that a
run resumed after a crash never sends an accepted or in-flight chunk again."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import CampaignKitError, ValidationError

T = TypeVar("T")

PLANNED, IN_FLIGHT, ACCEPTED, REJECTED, AMBIGUOUS = (
    "planned",
    "in_flight",
    "accepted",
    "rejected",
    "ambiguous",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    id TEXT PRIMARY KEY,
    poll TEXT NOT NULL,
    idx INTEGER NOT NULL,
    size INTEGER NOT NULL,
    state TEXT NOT NULL,
    detail TEXT,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    poll TEXT PRIMARY KEY,
    chunk_size INTEGER NOT NULL
);
"""


class Journal:
    """Chunk states in an SQLite file, written from one worker thread.

    fsync safety: the file is in WAL mode with ``synchronous=FULL``, and every
    state change is its own committed transaction (autocommit). In WAL mode a
    commit appends to the -wal file and, with FULL, fsyncs it before
    ``execute`` returns. So the ``in_flight`` row is on disk before the
    request leaves: a ``kill -9`` (which loses no OS buffers) or even a power
    loss right after cannot make a resumed run resend that chunk. (NORMAL
    would survive kill -9 too, since a WAL commit reaches the OS before it
    returns, but a power cut could drop the last commits and so the in-flight
    mark: we pay one fsync per state change, a few per 1,000 users.)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="campaignkit-journal"
        )
        self._conn: sqlite3.Connection | None = None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def open(self, poll: str, chunk_size: int) -> None:
        await self._run(self._open, poll, chunk_size)

    async def close(self) -> None:
        try:
            await asyncio.shield(self._run(self._close))
        finally:
            self._executor.shutdown(wait=False)

    async def plan(self, chunk_id: str, poll: str, index: int, size: int) -> tuple[str, str | None]:
        """The recorded state of the chunk, recording it as planned if new."""
        return await self._run(self._plan, chunk_id, poll, index, size)

    async def mark(self, chunk_id: str, state: str, detail: str | None = None) -> None:
        await self._run(self._mark, chunk_id, state, detail)

    # The methods below run on the journal thread only.

    def _open(self, poll: str, chunk_size: int) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise CampaignKitError(f"the journal {self.path!r} cannot use WAL mode ({mode})")
            conn.execute("PRAGMA synchronous=FULL")
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT chunk_size FROM runs WHERE poll = ?", (poll,)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO runs (poll, chunk_size) VALUES (?, ?)", (poll, chunk_size)
                )
            elif row[0] != chunk_size:
                raise ValidationError(
                    [
                        (
                            "chunk_size",
                            f"the journal was written with chunk_size={row[0]} for this poll: "
                            "resume with the same chunk_size (and the same input order), or "
                            "chunks would be formed differently and could be sent twice",
                        )
                    ]
                )
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _plan(self, chunk_id: str, poll: str, index: int, size: int) -> tuple[str, str | None]:
        assert self._conn is not None
        row = self._conn.execute(
            "SELECT state, detail FROM chunks WHERE id = ?", (chunk_id,)
        ).fetchone()
        if row is not None:
            return str(row[0]), row[1]
        self._conn.execute(
            "INSERT INTO chunks (id, poll, idx, size, state, detail, updated) "
            "VALUES (?, ?, ?, ?, ?, NULL, ?)",
            (chunk_id, poll, index, size, PLANNED, time.time()),
        )
        return PLANNED, None

    def _mark(self, chunk_id: str, state: str, detail: str | None) -> None:
        assert self._conn is not None
        self._conn.execute(
            "UPDATE chunks SET state = ?, detail = ?, updated = ? WHERE id = ?",
            (state, detail, time.time(), chunk_id),
        )
