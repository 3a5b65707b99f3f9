"""The workers honour the ledger's suppression list (real Redis, PostgreSQL
and the sandbox): a run never sends numbers listed before it was submitted,
nor those listed while its chunks wait; ``submit(...,
ignore_suppression=True)`` sends those listed before."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from helpers.workers import producer, unique_name

from campaignkit import User
from campaignkit.ledger import PostgresLedger
from campaignkit.sandbox import Sandbox
from campaignkit.workers import BulkWorkers, broker_from

pytestmark = pytest.mark.timeout(60)


@contextlib.asynccontextmanager
async def a_worker(sb: Sandbox, redis_url: str, queue: str, dsn: str) -> AsyncIterator[None]:
    stop = asyncio.Event()
    side = BulkWorkers(broker_from(redis_url, queue=queue), dsn, client=sb.client)
    task = asyncio.create_task(side.work(concurrency=2, stop=stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


def people(count: int) -> list[User]:
    return [User(cellphone=f"320{n:07d}", country_code="+57") for n in range(count)]


async def test_workers_never_send_a_suppressed_number(
    sb: Sandbox, postgres_dsn: str, redis_url: str
) -> None:
    queue = unique_name("ck-test-")
    async with PostgresLedger(postgres_dsn) as ledger:
        await ledger.suppress(["+573200000001", "+573200000004"], "FAILURE_BY_OPTOUT_CONTACT")
    async with sb.client() as client:
        poll = (await client.list_polls())[0].id
    async with producer(redis_url, queue, postgres_dsn) as bulk:
        run = await bulk.submit(poll, people(6), run="listed", chunk_size=2)
        # Listed while the run's chunks wait in the queue: not sent either.
        async with PostgresLedger(postgres_dsn) as ledger:
            await ledger.suppress(["+573200000003"], "opt_out")
        async with a_worker(sb, redis_url, queue, postgres_dsn):
            report = await bulk.wait(run, poll_interval=0.05, timeout=30)
            counts = (await sb.snapshot())["companies"][0]["phone_counts"]
            assert set(counts) == {f"+57320000000{n}" for n in (0, 2, 5)}
            assert report.counts["suppressed"] == 3
            assert report.counts["accepted"] == 3
            assert [(s.phone, s.reason) for s in report.suppressed] == [
                ("+573200000001", "FAILURE_BY_OPTOUT_CONTACT"),
                ("+573200000003", "opt_out"),
                ("+573200000004", "FAILURE_BY_OPTOUT_CONTACT"),
            ]
    async with (
        a_worker(sb, redis_url, queue, postgres_dsn),
        producer(redis_url, queue, postgres_dsn) as bulk,
    ):
        ignoring = await bulk.submit(
            poll, people(6), run="ignoring", chunk_size=2, ignore_suppression=True
        )
        assert (await bulk.wait(ignoring, poll_interval=0.05, timeout=30)).counts["accepted"] == 6
    counts = (await sb.snapshot())["companies"][0]["phone_counts"]
    assert counts["+573200000001"] == counts["+573200000004"] == 1
