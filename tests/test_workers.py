"""campaignkit.workers on real servers: Redis (the broker), PostgreSQL (the
ledger) and the sandbox (the service), with in-process workers and worker
processes killed with SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from helpers.bulk_child import expected_phones, make_users

from campaignkit.ledger import PostgresLedger
from campaignkit.sandbox import Sandbox
from campaignkit.workers import BulkWorkers, broker_from

pytestmark = pytest.mark.timeout(60)

COUNT = 3000
VALID = len(expected_phones(COUNT))


@pytest.fixture
async def sb() -> AsyncIterator[Sandbox]:
    async with Sandbox(speed=50) as sandbox:
        yield sandbox


@pytest.fixture
def queue() -> str:
    """A queue of this test's own on the shared Redis."""
    return f"campaignkit-test-{uuid.uuid4().hex[:12]}"


async def first_poll(sb: Sandbox) -> int:
    async with sb.client() as client:
        return (await client.list_polls())[0].id


async def phone_counts(sb: Sandbox) -> dict[str, int]:
    counts: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    return counts


@contextlib.asynccontextmanager
async def workers(
    redis_url: str, queue: str, dsn: str, sb: Sandbox, *, count: int = 2, **options: Any
) -> AsyncIterator[list[BulkWorkers]]:
    """``count`` in-process workers, each on a broker of its own; stopped on exit."""
    stop = asyncio.Event()
    sides = [
        BulkWorkers(broker_from(redis_url, queue=queue, **options), dsn, client=sb.client)
        for _ in range(count)
    ]
    tasks = [asyncio.create_task(side.work(concurrency=2, stop=stop)) for side in sides]
    try:
        yield sides
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)


@contextlib.asynccontextmanager
async def producer(redis_url: str, queue: str, dsn: str) -> AsyncIterator[BulkWorkers]:
    broker = broker_from(redis_url, queue=queue)
    await broker.startup()
    try:
        async with BulkWorkers(broker, dsn) as bulk:
            yield bulk
    finally:
        await broker.shutdown()


async def assert_once(sb: Sandbox, dsn: str, run: str, report: Any) -> None:
    """Nobody received twice; every valid user is accepted (and received once)
    or ambiguous (received at most once); the report accounts for every input."""
    counts = await phone_counts(sb)
    async with PostgresLedger(dsn) as ledger:
        states = {record.phone: record.state async for record in ledger.records(run)}
    assert max(counts.values()) == 1
    assert set(states) == expected_phones(COUNT)
    assert set(states.values()) <= {"accepted", "ambiguous"}
    assert {phone for phone, state in states.items() if state == "accepted"} <= set(counts)
    assert set(counts) <= set(states)
    assert report.total == COUNT
    assert report.counts["accepted"] + report.counts["ambiguous"] == VALID
    assert report.counts["invalid"] + report.counts["duplicate"] == COUNT - VALID


async def test_producer_and_workers_send_a_run(
    sb: Sandbox, postgres_dsn: str, redis_url: str, queue: str
) -> None:
    async with (
        workers(redis_url, queue, postgres_dsn, sb),
        producer(redis_url, queue, postgres_dsn) as bulk,
    ):
        run = await bulk.submit(
            await first_poll(sb), make_users(COUNT), run="spring", chunk_size=200
        )
        seen = [p async for p in bulk.progress(run, poll_interval=0.05)]
        report = await bulk.wait(run, timeout=30)
    assert run == "spring"
    assert seen[-1].done
    assert seen[-1].counts["accepted"] == VALID
    assert seen[-1].total == COUNT
    assert report.counts["accepted"] == VALID
    await assert_once(sb, postgres_dsn, run, report)
