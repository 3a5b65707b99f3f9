"""``send_chunk`` and ``submit_run`` driven as any task engine would (Celery,
arq, ...): the producer's ``enqueue`` puts ``(run, chunk)`` on a plain asyncio
queue, plain asyncio tasks await ``send_chunk`` for each message, every
message delivered twice; on the real PostgreSQL ledger and the sandbox."""

from __future__ import annotations

import asyncio
from collections import Counter

import asyncpg
import pytest
from helpers.bulk_child import expected_phones, make_users
from helpers.workers import terminate_postgres, unique_name, with_application_name

from campaignkit import CampaignClient
from campaignkit.ledger import ACCEPTED, AMBIGUOUS, IN_FLIGHT, PLANNED, PostgresLedger
from campaignkit.sandbox import Sandbox
from campaignkit.workers import ChunkResult, send_chunk, submit_run

pytestmark = pytest.mark.timeout(60)

COUNT = 1000


async def first_poll(client: CampaignClient) -> int:
    return (await client.list_polls())[0].id


async def test_plain_asyncio_tasks_send_a_run_nobody_twice(sb: Sandbox, postgres_dsn: str) -> None:
    messages: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
    results: list[ChunkResult | None] = []

    async def enqueue(run: str, chunk: str) -> None:
        # Each message delivered twice, as an engine retrying a task may.
        messages.put_nowait((run, chunk))
        messages.put_nowait((run, chunk))

    async def worker(client: CampaignClient, ledger: PostgresLedger) -> None:
        while (message := await messages.get()) is not None:
            results.append(await send_chunk(client, ledger, *message))

    async with sb.client() as client, PostgresLedger(postgres_dsn) as ledger:
        poll = await first_poll(client)
        run = await submit_run(
            ledger, poll, make_users(COUNT), enqueue=enqueue, run="engine", chunk_size=100
        )
        assert run == "engine"
        for _ in range(3):
            messages.put_nowait(None)
        await asyncio.gather(*(worker(client, ledger) for _ in range(3)))
        report = await ledger.report(run)
        counts = await ledger.counts(run)

    sent = [result for result in results if result is not None]
    assert len(results) == 2 * len(sent)  # every second delivery found nothing to claim
    assert {result.outcome for result in sent} == {"accepted"}
    assert sum(result.users for result in sent) == len(expected_phones(COUNT))
    assert counts[ACCEPTED] == len(expected_phones(COUNT))
    assert counts[PLANNED] == counts[IN_FLIGHT] == 0
    assert report.total == COUNT
    assert sum(report.counts.values()) == COUNT
    received: Counter[str] = Counter((await sb.snapshot())["companies"][0]["phone_counts"])
    assert set(received) == expected_phones(COUNT)
    assert max(received.values()) == 1


async def test_a_task_cancelled_mid_request_settles_its_chunk_ambiguous(
    sb: Sandbox, postgres_dsn: str
) -> None:
    chunks: list[tuple[str, str]] = []

    async def enqueue(run: str, chunk: str) -> None:
        chunks.append((run, chunk))

    # The sandbox takes each request, then answers 5 s later.
    await sb.set_faults({"kind": "latency", "route": "send_campaign", "seconds": 5})
    async with sb.client() as client, PostgresLedger(postgres_dsn) as ledger:
        poll = await first_poll(client)
        await submit_run(ledger, poll, make_users(50), enqueue=enqueue, run="cut")
        [(run, chunk)] = chunks
        task = asyncio.create_task(send_chunk(client, ledger, run, chunk))
        for _ in range(200):  # until the sandbox has the request
            if (await sb.admin("GET", "/faults"))["requests"].get("send_campaign"):
                break
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        counts = await ledger.counts(run)
        # Run again (a retried task): nothing left to claim, nobody sent twice.
        assert await send_chunk(client, ledger, run, chunk) is None
    assert counts[AMBIGUOUS] == len(expected_phones(50))
    assert counts[IN_FLIGHT] == 0


async def test_a_task_cancelled_while_waiting_to_retry_a_429_leaves_its_chunk_to_send(
    sb: Sandbox, postgres_dsn: str
) -> None:
    """The service refused the request (429, by the spec without effect) and
    asked for a wait: cancelled during it, the chunk was surely not sent, so
    it is planned again, and the task run again sends it."""
    chunks: list[tuple[str, str]] = []

    async def enqueue(run: str, chunk: str) -> None:
        chunks.append((run, chunk))

    await sb.set_faults({"kind": "429", "route": "send_campaign", "count": 1, "retry_after": 30})
    async with sb.client() as client, PostgresLedger(postgres_dsn) as ledger:
        waiting = asyncio.Event()
        sleep = client.transport.sleep

        async def wait_to_retry(seconds: float) -> None:
            waiting.set()
            await sleep(seconds)

        client.transport.sleep = wait_to_retry
        poll = await first_poll(client)
        await submit_run(ledger, poll, make_users(50), enqueue=enqueue, run="cut")
        [(run, chunk)] = chunks
        task = asyncio.create_task(send_chunk(client, ledger, run, chunk))
        await asyncio.wait_for(waiting.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        counts = await ledger.counts(run)
        again = await send_chunk(client, ledger, run, chunk)
        settled = await ledger.counts(run)
    valid = len(expected_phones(50))
    assert (counts[PLANNED], counts[IN_FLIGHT], counts[AMBIGUOUS]) == (valid, 0, 0)
    assert again is not None
    assert (again.outcome, again.users) == ("accepted", valid)
    assert settled[ACCEPTED] == valid
    received: Counter[str] = Counter((await sb.snapshot())["companies"][0]["phone_counts"])
    assert set(received) == expected_phones(50)
    assert max(received.values()) == 1


@pytest.mark.parametrize("table", ["campaignkit_run_options", "campaignkit_claims"])
async def test_a_ledger_session_terminated_mid_chunk_does_not_fail_it(
    sb: Sandbox, postgres_dsn: str, table: str
) -> None:
    """The worker's ledger session is terminated while it reads the run's
    options (or claims the chunk): the read or claim is made again on a new
    connection and the chunk is sent; a failed task would be acknowledged by
    its engine and its chunk left planned for ever."""
    chunks: list[tuple[str, str]] = []

    async def enqueue(run: str, chunk: str) -> None:
        chunks.append((run, chunk))

    name = unique_name("ck_chunk_")
    async with PostgresLedger(postgres_dsn) as producer:
        poll = (await sb.snapshot())["companies"][0]["polls"][0]["id"]
        await submit_run(producer, poll, make_users(50), enqueue=enqueue, run="cut")
    [(run, chunk)] = chunks
    blocker = await asyncpg.connect(postgres_dsn)
    async with (
        sb.client() as client,
        PostgresLedger(with_application_name(postgres_dsn, name)) as ledger,
    ):
        try:
            # The worker's statement waits behind this lock; its session is terminated there.
            tx = blocker.transaction()
            await tx.start()
            await blocker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            sending = asyncio.create_task(send_chunk(client, ledger, run, chunk))
            terminated = 0
            for _ in range(200):
                if terminated := await terminate_postgres(postgres_dsn, name, waiting=True):
                    break
                await asyncio.sleep(0.05)
            await tx.rollback()
            assert terminated >= 1
            result = await asyncio.wait_for(sending, 30)
        finally:
            await blocker.close()
        counts = await ledger.counts(run)
    assert result is not None
    assert (result.outcome, result.users) == ("accepted", len(expected_phones(50)))
    assert counts[ACCEPTED] == len(expected_phones(50))
