"""``campaignkit worker`` processes on the real Redis and PostgreSQL, and
cutting their connections (only theirs: by Redis client name, by PostgreSQL
application_name)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import redis.asyncio

from campaignkit.ledger import ledger_from
from campaignkit.sandbox import Sandbox
from campaignkit.workers import BulkWorkers, broker_from
from campaignkit.workers._brokers import client_name
from helpers.cli import sandbox_env


@contextlib.asynccontextmanager
async def producer(redis_url: str, queue: str, dsn: str) -> AsyncIterator[BulkWorkers]:
    """A producer's side of a run: its broker started, stopped on exit."""
    broker = broker_from(redis_url, queue=queue)
    await broker.startup()
    try:
        async with BulkWorkers(broker, dsn) as bulk:
            yield bulk
    finally:
        await broker.shutdown()


def with_application_name(dsn: str, name: str) -> str:
    """``dsn`` whose connections carry ``application_name=name``."""
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"


def unique_name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


class Worker:
    """A ``campaignkit worker`` process and the lines of its stderr so far."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reader = asyncio.create_task(self._read())
        self.ready = asyncio.Event()

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if "ready" in line:
                self.ready.set()

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    def count(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    async def stop(self) -> int:
        """SIGTERM (if alive) and wait; the exit status."""
        if self.alive:
            self.process.terminate()
        code = await asyncio.wait_for(self.process.wait(), 30)
        await asyncio.wait_for(self._reader, 5)
        return code


@contextlib.asynccontextmanager
async def worker_process(
    sb: Sandbox, broker: str, queue: str, journal: str, *options: str
) -> AsyncIterator[Worker]:
    """``campaignkit worker`` in a process of its own, ready; killed on exit.
    Its ledger is created first if need be (a worker never creates one), as
    the first producer's ``submit --create`` would."""
    async with ledger_from(journal):
        pass
    env = sandbox_env(sb)
    argv = ["--broker", broker, "--journal", journal, "--queue", queue, *options]
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("campaignkit")),
        "worker",
        *argv,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    worker = Worker(process)
    try:
        ready = asyncio.create_task(worker.ready.wait())
        await asyncio.wait(
            [ready, asyncio.create_task(process.wait())], timeout=30, return_when="FIRST_COMPLETED"
        )
        assert worker.ready.is_set(), "\n".join(worker.lines)
        yield worker
    finally:
        if worker.alive:
            process.kill()
        await process.wait()


@contextlib.asynccontextmanager
async def worker_fleet(
    sb: Sandbox, redis_url: str, postgres_dsn: str, prefix: str, count: int = 3
) -> AsyncIterator[BulkWorkers]:
    """``count`` worker processes (one chunk at a time each) on a queue of
    their own, named after ``prefix``, and the producer's side."""
    queue = unique_name(prefix)
    broker = broker_from(redis_url, queue=queue)
    await broker.startup()
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(count):
            await stack.enter_async_context(
                worker_process(sb, redis_url, queue, postgres_dsn, "--concurrency", "1")
            )
        stack.push_async_callback(broker.shutdown)
        yield await stack.enter_async_context(BulkWorkers(broker, postgres_dsn, client=sb.client))


async def kill_redis_clients(redis_url: str, queue: str) -> int:
    """Kill the Redis connections of the workers of ``queue`` (by their
    client name); how many there were."""
    name = client_name(queue)
    conn: Any = redis.asyncio.from_url(redis_url)
    try:
        clients = await conn.client_list()
        ids = [c["id"] for c in clients if c.get("name") == name]
        for client_id in ids:
            await conn.client_kill_filter(_id=client_id)
    finally:
        await conn.aclose()
    return len(ids)


async def terminate_postgres(dsn: str, application_name: str, *, waiting: bool = False) -> int:
    """Terminate the PostgreSQL sessions named ``application_name`` (only
    those waiting for a lock with ``waiting``); how many there were."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = $1 AND pid <> pg_backend_pid()"
            + (" AND wait_event_type = 'Lock'" if waiting else ""),
            application_name,
        )
    finally:
        await conn.close()
    return sum(1 for row in rows if row[0])
