"""campaignkit.workers on real servers: Redis (the broker), PostgreSQL (the
ledger) and the sandbox (the service), with in-process workers and worker
processes killed with SIGKILL."""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import redis.asyncio
from helpers.bulk_child import expected_phones, make_users
from helpers.workers import producer, worker_process
from taskiq import TaskiqMessage, TaskiqMiddleware, TaskiqResult

from campaignkit.bulk import Planner
from campaignkit.ledger import PostgresLedger
from campaignkit.sandbox import Sandbox
from campaignkit.workers import BulkWorkers, broker_from

pytestmark = pytest.mark.timeout(60)

COUNT = 3000
# Short claims and redeliveries: a killed worker's chunks are settled within seconds.
FAST = ("--concurrency", "2", "--claim-ttl", "2", "--redeliver-after", "1")
VALID = len(expected_phones(COUNT))


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


class Results(TaskiqMiddleware):
    """What each execution of a task returned."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.values: list[Any] = []
        self.expected = expected
        self.all_in = asyncio.Event()

    def post_execute(self, message: TaskiqMessage, result: TaskiqResult[Any]) -> None:
        self.values.append(result.return_value)
        if len(self.values) >= self.expected:
            self.all_in.set()


@contextlib.asynccontextmanager
async def workers(
    redis_url: str,
    queue: str,
    dsn: str,
    sb: Sandbox,
    *,
    count: int = 2,
    results: Results | None = None,
    **options: Any,
) -> AsyncIterator[list[BulkWorkers]]:
    """``count`` in-process workers, each on a broker of its own; stopped on exit."""
    stop = asyncio.Event()
    sides = []
    for _ in range(count):
        broker = broker_from(redis_url, queue=queue, **options)
        if results is not None:
            broker.add_middlewares(results)
        sides.append(BulkWorkers(broker, dsn, client=sb.client))
    tasks = [asyncio.create_task(side.work(concurrency=2, stop=stop)) for side in sides]
    try:
        yield sides
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 20)


async def assert_once(sb: Sandbox, dsn: str, run: str, report: Any) -> None:
    """Nobody received twice; every valid user is accepted (and received once)
    or ambiguous (received at most once)."""
    counts = await phone_counts(sb)
    async with PostgresLedger(dsn) as ledger:
        states = {record.phone: record.state async for record in ledger.records(run)}
    assert max(counts.values()) == 1
    assert set(states) == expected_phones(COUNT)
    assert set(states.values()) <= {"accepted", "ambiguous"}
    assert {phone for phone, state in states.items() if state == "accepted"} <= set(counts)
    assert set(counts) <= set(states)
    assert report.counts["accepted"] + report.counts["ambiguous"] == VALID


def assert_inputs(report: Any) -> None:
    """The report accounts for every input of ``make_users(COUNT)`` read once."""
    assert report.total == COUNT
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
    assert seen[-1].finished
    assert seen[-1].states["accepted"] == VALID
    assert seen[-1].total == COUNT
    assert report.counts["accepted"] == VALID
    assert_inputs(report)
    await assert_once(sb, postgres_dsn, run, report)


async def test_redelivered_messages_send_nobody_twice(
    sb: Sandbox, postgres_dsn: str, redis_url: str, queue: str
) -> None:
    """Every message delivered twice, as an at-least-once broker may: a copy
    added to the stream, and the original redelivered by Redis after a
    consumer took it and never acknowledged it."""
    poll = await first_poll(sb)
    async with producer(redis_url, queue, postgres_dsn) as bulk:
        run = await bulk.submit(poll, make_users(COUNT), chunk_size=250)
    chunks = -(-VALID // 250)
    conn = redis.asyncio.from_url(redis_url)
    try:
        # [(stream, [(message id, fields), ...])], as the Redis protocol answers it.
        Read = list[tuple[bytes, list[tuple[bytes, dict[Any, Any]]]]]
        taken = cast(
            Read, await conn.xreadgroup("taskiq", "dead-consumer", {queue: ">"}, count=1000)
        )
        messages = taken[0][1]
        assert len(messages) == chunks
        for _, fields in messages:
            await conn.xadd(queue, fields)
    finally:
        await conn.aclose()
    results = Results(2 * chunks)
    async with (
        workers(redis_url, queue, postgres_dsn, sb, results=results, redeliver_after=0.2),
        producer(redis_url, queue, postgres_dsn) as bulk,
    ):
        report = await bulk.wait(run, poll_interval=0.05, timeout=30)
        await asyncio.wait_for(results.all_in.wait(), 10)  # the redelivered originals
    # Each chunk is sent once; every other delivery of it finds nothing to
    # claim: the copies, the reclaimed originals, and (on a loaded machine) a
    # message reclaimed again while its first worker was still at it.
    outcomes = Counter(results.values)
    assert outcomes["accepted"] == chunks
    assert outcomes[None] >= chunks
    assert set(outcomes) == {"accepted", None}
    assert report.counts["accepted"] == VALID
    assert_inputs(report)
    await assert_once(sb, postgres_dsn, run, report)


async def test_worker_killed_mid_run_then_restarted(
    sb: Sandbox, postgres_dsn: str, redis_url: str, queue: str
) -> None:
    """SIGKILL a worker process while its requests are under way (each is
    processed by the sandbox, then answered 0.3 s later): its claims expire
    and are reported ambiguous, a new worker sends the rest, nobody twice."""
    poll = await first_poll(sb)
    await sb.set_faults(
        {"kind": "latency", "seconds": 0.3, "route": "send_campaign", "when": "after"}
    )
    async with producer(redis_url, queue, postgres_dsn) as bulk:
        async with worker_process(sb, redis_url, queue, postgres_dsn, *FAST) as first:
            run = await bulk.submit(poll, make_users(COUNT), chunk_size=50)
            async for progress in bulk.progress(run, poll_interval=0.01):
                if progress.states["accepted"] >= 500 and progress.states["in_flight"]:
                    first.process.send_signal(signal.SIGKILL)
                    break
        assert progress.states["accepted"] < VALID
        async with worker_process(sb, redis_url, queue, postgres_dsn, *FAST):
            report = await bulk.wait(run, poll_interval=0.2, timeout=40)
    assert report.counts["ambiguous"] >= 1
    assert_inputs(report)
    await assert_once(sb, postgres_dsn, run, report)


async def test_restarted_producer(
    sb: Sandbox, postgres_dsn: str, redis_url: str, queue: str
) -> None:
    """A producer that died after planning a chunk but before enqueueing it,
    another cancelled half-way; a third, with the rest of the input shuffled,
    enqueues the orphan chunk and plans only who is left: everyone sent once."""
    poll = await first_poll(sb)
    users = list(make_users(COUNT))
    planner = Planner(1000)
    assert all(planner.take(user) is None for user in users[:100])
    orphan = planner.flush()
    assert orphan is not None
    async with PostgresLedger(postgres_dsn) as ledger:
        await ledger.start_run("r", str(poll))
        await ledger.plan("r", "orphan", orphan.recipients)
        assert await ledger.unenqueued_chunks("r") == ["orphan"]
    rest = users[100:]
    async with (
        producer(redis_url, queue, postgres_dsn) as bulk,
        workers(redis_url, queue, postgres_dsn, sb),
    ):

        async def stalls_half_way() -> AsyncIterator[Any]:
            # The first half, then an input that never ends: the producer is
            # surely mid-input when it is cancelled.
            for user in rest[: len(rest) // 2]:
                yield user
            await asyncio.Event().wait()

        half = asyncio.create_task(bulk.submit(poll, stalls_half_way(), run="r", chunk_size=100))
        async for progress in bulk.progress("r", poll_interval=0.01):
            if progress.states["accepted"] >= 500:
                break
        half.cancel()
        with pytest.raises(asyncio.CancelledError):
            await half
        random.Random(5).shuffle(rest)
        assert await bulk.submit(poll, rest, run="r", chunk_size=70) == "r"
        report = await bulk.wait("r", poll_interval=0.05, timeout=30)
    assert report.counts["accepted"] == VALID
    # The skipped inputs are those of the last pass, counted once.
    last_pass = Planner(70)
    for user in rest:
        last_pass.take(user)
    assert report.counts["invalid"] == len(last_pass.invalid)
    assert report.counts["duplicate"] == len(last_pass.duplicates)
    await assert_once(sb, postgres_dsn, "r", report)
