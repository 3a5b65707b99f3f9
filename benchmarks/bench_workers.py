"""Row 10: bulk sends across worker processes (``campaignkit.workers``) against
the sandbox (its own process) answering each send 50 ms late: throughput of 1,
2 and 4 ``campaignkit worker`` processes as ratios to 1, and ``send_bulk``
against a one-user-per-request loop under the same latency.

Needs PostgreSQL and Redis (``CAMPAIGNKIT_TEST_POSTGRES_DSN``,
``CAMPAIGNKIT_TEST_REDIS_URL``; defaults: the local servers); the ledger lives
in a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp

from campaignkit import CampaignClient, User
from campaignkit.ledger import PostgresLedger
from campaignkit.workers import BulkWorkers, broker_from

from ._harness import Row, Timing, throughput_ratio
from .bench_bulk import make_users, sandbox

POSTGRES_DSN = os.environ.get(
    "CAMPAIGNKIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("CAMPAIGNKIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
LATENCY = 0.05
CHUNK = 200
WORKER_CONCURRENCY = 1
SCRIPT = Path(sys.executable).with_name("campaignkit")


@contextlib.asynccontextmanager
async def ledger_schema() -> AsyncIterator[str]:
    """A DSN whose connections work in a new schema holding a new ledger, dropped afterwards."""
    import asyncpg

    schema = f"ck_bench_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(POSTGRES_DSN)
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
    finally:
        await conn.close()
    separator = "&" if "?" in POSTGRES_DSN else "?"
    dsn = f"{POSTGRES_DSN}{separator}options=-csearch_path%3D{schema}"
    try:
        async with PostgresLedger(dsn):  # workers never create their ledger
            pass
        yield dsn
    finally:
        conn = await asyncpg.connect(POSTGRES_DSN)
        try:
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        finally:
            await conn.close()


async def set_latency(urls: dict[str, str], seconds: float) -> None:
    """Every send is processed at once and answered ``seconds`` later."""
    fault = {"kind": "latency", "seconds": seconds, "route": "send_campaign", "when": "after"}
    async with (
        aiohttp.ClientSession() as http,
        http.put(f"{urls['admin_url']}/faults", json={"faults": [fault]}) as response,
    ):
        response.raise_for_status()


class Worker:
    """A ``campaignkit worker`` process, started and ready."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(
        cls, urls: dict[str, str], dsn: str, queue: str, *, concurrency: int, claim_ttl: float
    ) -> Worker:
        env = {
            **os.environ,
            "CAMPAIGNKIT_API_KEY": urls["api_key"],
            "CAMPAIGNKIT_BASE_URL": urls["base_url"],
            "CAMPAIGNKIT_CAMPAIGN_URL": urls["campaign_url"],
            "CAMPAIGNKIT_AGENT_URL": urls["agent_url"],
        }
        process = await asyncio.create_subprocess_exec(
            str(SCRIPT),
            "worker",
            "--broker",
            REDIS_URL,
            "--journal",
            dsn,
            "--queue",
            queue,
            "--concurrency",
            str(concurrency),
            "--claim-ttl",
            str(claim_ttl),
            "--redeliver-after",
            "2",
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        assert process.stderr is not None
        line = await asyncio.wait_for(process.stderr.readline(), 60)
        if b"ready" not in line:
            process.kill()
            raise RuntimeError(f"the worker did not start: {line!r}")
        return cls(process)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(self.process.wait(), 60)


@contextlib.asynccontextmanager
async def producer(dsn: str, queue: str) -> AsyncIterator[BulkWorkers]:
    broker = broker_from(REDIS_URL, queue=queue)
    await broker.startup()
    try:
        async with BulkWorkers(broker, dsn) as bulk:
            yield bulk
    finally:
        await broker.shutdown()


def fresh_users(count: int) -> Iterator[User]:
    """Phones never sent before (the sandbox keeps what it received), within
    the 8 digits that ``make_users`` writes after the area code: Mexico's
    numbers have 10."""
    return iter(make_users(count, start=int(time.time() * 1000) % 10**6 * 50))


async def timed_run(urls: dict[str, str], dsn: str, poll: int, workers: int, users: int) -> float:
    """Seconds for ``workers`` ready worker processes to send ``users`` users."""
    queue = f"campaignkit-bench-{uuid.uuid4().hex[:8]}"
    started_workers = [
        await Worker.start(urls, dsn, queue, concurrency=WORKER_CONCURRENCY, claim_ttl=600)
        for _ in range(workers)
    ]
    try:
        async with producer(dsn, queue) as bulk:
            run = await bulk.submit(poll, fresh_users(users), run=queue, chunk_size=CHUNK)
            # Read seldom, so the producer's reads cost the workers no CPU; the
            # time is the ledger's: from the run's start to its last settle.
            report = await bulk.wait(run, poll_interval=0.5)
            elapsed = report.elapsed
    finally:
        for worker in started_workers:
            await worker.stop()
    if report.counts["accepted"] != users:
        raise RuntimeError(f"the run did not complete: {report!r}")
    return elapsed


async def bench(quick: bool) -> list[Row]:
    users = 2_000 if quick else 20_000
    rounds = 1 if quick else 3
    bulk_users = 5_000 if quick else 50_000
    sample = 10 if quick else 40
    with sandbox() as urls:
        urls["admin_url"] = urls["admin_url"].rstrip("/")
        await set_latency(urls, LATENCY)
        async with (
            ledger_schema() as dsn,
            CampaignClient(
                urls["api_key"], base_url=urls["base_url"], campaign_url=urls["campaign_url"]
            ) as client,
        ):
            poll = (await client.list_polls())[0].id
            samples: dict[int, list[float]] = {1: [], 2: [], 4: []}
            for _ in range(rounds):  # interleaved, so drift hits every count alike
                for workers, times in samples.items():
                    times.append(await timed_run(urls, dsn, poll, workers, users))
            timings = {n: Timing.of(times) for n, times in samples.items()}

            bulk_times, naive_times = [], []
            for _ in range(rounds):
                started = time.perf_counter()
                report = await client.send_bulk(
                    poll, fresh_users(bulk_users), chunk_size=1000, concurrency=4
                )
                bulk_times.append(time.perf_counter() - started)
                if report.counts["accepted"] != bulk_users:
                    raise RuntimeError(f"send_bulk did not complete: {report!r}")
                started = time.perf_counter()
                for user in fresh_users(sample):
                    await client.send_campaign(poll, [user])
                naive_times.append((time.perf_counter() - started) * bulk_users / sample)
    figures: dict[str, Any] = {
        f"users_per_s_{n}_workers": users / t.median for n, t in timings.items()
    }
    note = (
        f"({users:,} users, chunks of {CHUNK}, {WORKER_CONCURRENCY} chunk at a time per worker, "
        f"{LATENCY * 1e3:.0f} ms per send; 1 worker: {users / timings[1].median:,.0f} users/s)"
    )
    bulk_t, naive_t = Timing.of(bulk_times), Timing.of(naive_times)
    return [
        throughput_ratio("10a 2 worker processes vs 1", timings[1], timings[2], None, notes=note),
        throughput_ratio(
            "10b 4 worker processes vs 1", timings[1], timings[4], 3.2, notes=note, figures=figures
        ),
        throughput_ratio(
            f"10c send_bulk {bulk_users:,} users vs one user per request, {LATENCY * 1e3:.0f} ms "
            "per send",
            naive_t,
            bulk_t,
            None,
            notes=f"(naive loop timed on {sample} users, extrapolated; chunks of 1,000, "
            f"concurrency 4: {bulk_users / bulk_t.median:,.0f} users/s)",
            figures={"send_bulk_users_per_s": bulk_users / bulk_t.median},
        ),
    ]


def run(quick: bool) -> list[Row]:
    return asyncio.run(bench(quick))
