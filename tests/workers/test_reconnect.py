"""``campaignkit worker`` processes whose connections are cut, on the real
Redis and PostgreSQL: they reconnect, go on working and log it; a chunk the
service accepted is settled as accepted after a ledger blip. Only the test's
own connections are cut (its Redis client name, its application_name)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import socket
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
import redis.asyncio
import redis.exceptions
import tenacity
from helpers.bulk_child import expected_phones, make_users
from helpers.real_servers import require_program
from helpers.workers import (
    kill_redis_clients,
    producer,
    terminate_postgres,
    unique_name,
    with_application_name,
    worker_process,
)
from taskiq import TaskiqState
from taskiq_redis import RedisStreamBroker

from campaignkit._backoff import reconnecting
from campaignkit.ledger import PostgresLedger
from campaignkit.sandbox import Sandbox
from campaignkit.workers import broker_from, submit_run
from campaignkit.workers._chunks import ChunkTask

pytestmark = pytest.mark.timeout(90)

COUNT = 600
VALID = len(expected_phones(COUNT))
# Claims long enough that a loaded machine cannot expire one mid-request (no
# worker is killed here); quick redelivery of messages a cut connection stranded.
FAST = ("--concurrency", "2", "--claim-ttl", "15", "--redeliver-after", "1")


async def first_poll(sb: Sandbox) -> int:
    async with sb.client() as client:
        return (await client.list_polls())[0].id


async def received(sb: Sandbox) -> dict[str, int]:
    counts: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    return counts


async def test_worker_survives_killed_redis_connections(
    sb: Sandbox, postgres_dsn: str, redis_url: str
) -> None:
    """Its Redis connections killed while idle, then again and again while it
    sends: the worker reconnects (one line each time), sends the whole run,
    nobody twice, and stops cleanly when told."""
    queue = unique_name("ck-test-")
    async with worker_process(sb, redis_url, queue, postgres_dsn, *FAST) as worker:
        killed = 0
        for _ in range(100):  # "ready" comes before its first read
            if killed := await kill_redis_clients(redis_url, queue):
                break
            await asyncio.sleep(0.05)
        assert killed >= 1
        await asyncio.sleep(0.5)
        assert worker.alive, "\n".join(worker.lines)
        async with producer(redis_url, queue, postgres_dsn) as bulk:
            run = await bulk.submit(await first_poll(sb), make_users(COUNT), chunk_size=50)
            async for progress in bulk.progress(run, poll_interval=0.1):
                if not progress.finished:
                    killed += await kill_redis_clients(redis_url, queue)
            report = await bulk.wait(run, timeout=30)
        assert worker.alive, "\n".join(worker.lines)
        assert await worker.stop() == 0
    log = "\n".join(worker.lines)
    assert worker.count("lost the broker") >= 1, log
    assert worker.count("reconnecting in") >= 1, log
    assert "TaskGroup" not in log
    # One line per chunk: each says how many users it sent, and how.
    chunks = -(-VALID // 50)
    assert worker.count(f"run {run} chunk ") >= chunks, log
    assert report.counts["accepted"] == VALID
    counts = await received(sb)
    assert len(counts) == VALID
    assert max(counts.values()) == 1


async def test_settling_survives_a_terminated_ledger_session(
    sb: Sandbox, postgres_dsn: str, redis_url: str
) -> None:
    """The worker's ledger session is terminated while it settles chunks the
    service accepted: the settling is run again on a new connection, and
    they are accepted, not left in flight and reported ambiguous."""
    queue = unique_name("ck-test-")
    name = unique_name("ck_test_")
    worker_dsn = with_application_name(postgres_dsn, name)
    # Each request is processed, then answered 0.5 s later: claims are in flight meanwhile.
    await sb.set_faults(
        {"kind": "latency", "seconds": 0.5, "route": "send_campaign", "when": "after"}
    )
    async with worker_process(sb, redis_url, queue, worker_dsn, *FAST) as worker:
        async with producer(redis_url, queue, postgres_dsn) as bulk:
            blocker = await asyncpg.connect(postgres_dsn)
            try:
                run = await bulk.submit(await first_poll(sb), make_users(200), chunk_size=50)
                async for progress in bulk.progress(run, poll_interval=0.02):
                    if progress.states["in_flight"]:
                        break
                # Settling waits behind this lock; its session is terminated there.
                tx = blocker.transaction()
                await tx.start()
                await blocker.execute("LOCK TABLE campaignkit_claims IN SHARE MODE")
                terminated = 0
                for _ in range(200):
                    terminated = await terminate_postgres(postgres_dsn, name, waiting=True)
                    if terminated:
                        break
                    await asyncio.sleep(0.05)
                await tx.rollback()
                assert terminated >= 1
                report = await bulk.wait(run, poll_interval=0.1, timeout=30)
            finally:
                await blocker.close()
        assert worker.alive, "\n".join(worker.lines)
    valid = len(expected_phones(200))
    log = "\n".join(worker.lines)
    assert worker.count("reconnecting in") >= 1, log
    assert report.counts["ambiguous"] == 0, log
    assert report.counts["accepted"] == valid
    async with PostgresLedger(postgres_dsn) as ledger:
        states = {record.state async for record in ledger.records(run)}
    assert states == {"accepted"}


async def test_a_ledger_lost_for_longer_than_it_waits_strands_no_chunk(
    sb: Sandbox, postgres_dsn: str
) -> None:
    """The worker's ledger is lost (each session terminated while it waits)
    for longer than its ``reconnect_timeout``: the chunk task is run again
    once the ledger is back, instead of failing, being acknowledged and
    leaving its chunk planned for good."""
    name = unique_name("ck_test_")

    def impatient() -> PostgresLedger:
        ledger = PostgresLedger(with_application_name(postgres_dsn, name))
        ledger.reconnect_timeout = 0.2
        return ledger

    chunks: list[str] = []

    async def enqueue(run: str, chunk: str) -> None:
        chunks.append(chunk)

    sender = ChunkTask(impatient, sb.client, timeout=None, max_retries=None)
    async with PostgresLedger(postgres_dsn) as ledger:
        run = await submit_run(
            ledger, await first_poll(sb), make_users(100), enqueue=enqueue, chunk_size=50
        )
        await sender.startup(TaskiqState())
        blocker = await asyncpg.connect(postgres_dsn)
        try:
            tx = blocker.transaction()
            await tx.start()
            await blocker.execute("LOCK TABLE campaignkit_claims IN SHARE MODE")
            sending = asyncio.create_task(sender.send(run, chunks[0], ledger.identity, None))
            terminated, lost_until = 0, asyncio.get_running_loop().time() + 1.5
            while asyncio.get_running_loop().time() < lost_until and not sending.done():
                terminated += await terminate_postgres(postgres_dsn, name, waiting=True)
                await asyncio.sleep(0.02)
            await tx.rollback()
            outcome = await asyncio.wait_for(sending, 30)
        finally:
            await blocker.close()
            await sender.shutdown(TaskiqState())
        counts = await ledger.counts(run)
    assert terminated >= 3
    assert outcome == "accepted"
    # Its chunk sent and settled; the other chunk, never given to a worker, still planned.
    assert (counts["accepted"], counts["in_flight"], counts["ambiguous"]) == (50, 0, 0)
    assert counts["planned"] >= 1


async def test_dead_consumers_chunk_reclaimed_while_connections_flap(
    sb: Sandbox, postgres_dsn: str, redis_url: str
) -> None:
    """A chunk left unacknowledged by a dead consumer is reclaimed even while
    the worker's connection is cut more often than its blocking read lasts
    (a read cut every time once kept a dead worker's chunk for ever)."""
    queue = unique_name("ck-test-")
    async with producer(redis_url, queue, postgres_dsn) as bulk:
        run = await bulk.submit(await first_poll(sb), make_users(50), chunk_size=50)
        conn = redis.asyncio.from_url(redis_url)
        try:
            taken: Any = await conn.xreadgroup("taskiq", "dead-consumer", {queue: ">"}, count=10)
        finally:
            await conn.aclose()
        assert len(taken[0][1]) == 1

        async def cut_for_ever() -> None:
            while True:
                await kill_redis_clients(redis_url, queue)
                await asyncio.sleep(0.3)

        async with worker_process(sb, redis_url, queue, postgres_dsn, *FAST) as worker:
            cutting = asyncio.create_task(cut_for_ever())
            try:
                report = await bulk.wait(run, poll_interval=0.1, timeout=20)
            finally:
                cutting.cancel()
            assert worker.alive, "\n".join(worker.lines)
    assert report.counts["accepted"] == len(expected_phones(50))
    assert max((await received(sb)).values()) == 1


async def test_a_cancelled_reader_does_not_reconnect() -> None:
    """A worker told to stop cancels its read; on Python 3.11 the read's own
    timeout can swallow that cancellation and raise the timeout error that a
    lost connection raises. Reconnecting then kept the stopped worker reading
    for ever: the cancellation wins."""

    reads = 0

    async def read_cancelled_into_a_timeout() -> None:
        nonlocal reads
        reads += 1
        with contextlib.suppress(asyncio.CancelledError):  # what the read's timeout did
            await asyncio.sleep(10)
        raise TimeoutError("Timeout reading from redis")

    retrying = reconnecting(TimeoutError, tenacity.stop_never, lambda *said: None)
    task: asyncio.Task[None] = asyncio.create_task(retrying(read_cancelled_into_a_timeout))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert reads == 1


async def test_a_stopped_worker_stops_even_if_its_read_swallows_the_cancellation(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Python 3.11, redis' pool and timeouts (their ``wait_for``) can swallow
    the cancellation of a read: a worker told to stop then waited for ever
    for a read nobody would end. The cancellation ends the wait at once."""
    broker: Any = broker_from(redis_url, queue=unique_name("ck-test-"))

    async def read_swallowing_its_cancellation(conn: Any) -> list[Any]:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        await asyncio.sleep(3600)  # a read that never ends
        return []

    monkeypatch.setattr(broker, "_fetch", read_swallowing_its_cancellation)
    reader = broker.listen()
    waiting = asyncio.ensure_future(reader.__anext__())
    await asyncio.sleep(0.1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(waiting, 5)
    await reader.aclose()
    await broker.shutdown()


async def test_a_connection_dropped_while_starting_up_is_reconnected(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The consumer group is declared after the worker says it is ready:
    its connection dropped there (a killed client) is reconnected, not the
    worker's end."""
    declare = RedisStreamBroker._declare_consumer_group
    calls = 0

    async def dropped_once(broker: RedisStreamBroker) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise redis.exceptions.ConnectionError("Connection closed by server.")
        await declare(broker)

    monkeypatch.setattr(RedisStreamBroker, "_declare_consumer_group", dropped_once)
    queue = unique_name("ck-test-")
    broker = broker_from(redis_url, queue=queue)
    assert isinstance(broker, RedisStreamBroker)
    await broker.startup()
    try:
        async with redis.asyncio.Redis.from_url(redis_url) as conn:
            groups = await conn.xinfo_groups(queue)
            await conn.delete(queue)
    finally:
        await broker.shutdown()
    assert calls == 2
    assert [group["name"] for group in groups] == [broker.consumer_group_name.encode()]
    assert "lost the broker declaring its consumer group" in caplog.text


async def test_a_read_failing_as_the_worker_stops_leaves_no_unretrieved_error(
    redis_url: str,
) -> None:
    """The worker told to stop cancels its read, and the read ends in a
    connection error instead (redis turns a cancellation during a read on a
    closed connection into one): the error is read, not logged by asyncio as
    never retrieved (CI's log showed it)."""
    broker: Any = broker_from(redis_url, queue=unique_name("ck-test-"))

    async def read_turning_its_cancellation_into_an_error(conn: object) -> list[Any]:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise redis.exceptions.ConnectionError("Connection closed by server.") from None
        raise AssertionError("never woken")

    broker._fetch = read_turning_its_cancellation_into_an_error
    unretrieved: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unretrieved.append(context))
    reader = broker.listen()
    try:
        reading = asyncio.ensure_future(reader.__anext__())
        await asyncio.sleep(0.1)  # the read is under way
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        del reading
        await reader.aclose()
        await broker.shutdown()
        for _ in range(3):  # the read's end, then its task's collection
            await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert unretrieved == []


@contextlib.asynccontextmanager
async def private_redis() -> AsyncIterator[str]:
    """A Redis server of this test's own (the shared one is never made a
    replica); its URL. Stopped on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = await asyncio.create_subprocess_exec(
        require_program("redis-server", "on Debian, apt install redis-server"),
        *("--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
        stdout=asyncio.subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        conn: Any = redis.asyncio.from_url(url)
        try:
            for _ in range(100):
                with contextlib.suppress(redis.exceptions.ConnectionError):
                    if await conn.ping():
                        break
                await asyncio.sleep(0.05)
        finally:
            await conn.aclose()
        yield url
    finally:
        server.terminate()
        await server.wait()


async def test_worker_survives_a_failover_that_demotes_its_server(
    sb: Sandbox, postgres_dsn: str
) -> None:
    """Its server turned into a replica (a failover): blocked reads are
    answered UNBLOCKED, commands READONLY. The worker waits for a writable
    server instead of ending (it exited 1 on these errors)."""
    queue = unique_name("ck-test-")
    async with private_redis() as url, private_redis() as other:
        port = int(other.rsplit(":", 1)[1].split("/")[0])
        admin: Any = redis.asyncio.from_url(url)
        try:
            async with worker_process(sb, url, queue, postgres_dsn, *FAST) as worker:
                await asyncio.sleep(0.5)  # blocked in its read
                await admin.execute_command("REPLICAOF", "127.0.0.1", str(port))
                await asyncio.sleep(2)
                assert worker.alive, "\n".join(worker.lines)
                await admin.execute_command("REPLICAOF", "NO", "ONE")  # promoted again
                async with producer(url, queue, postgres_dsn) as bulk:
                    run = await bulk.submit(await first_poll(sb), make_users(100), chunk_size=50)
                    report = await bulk.wait(run, timeout=30)
                assert worker.alive, "\n".join(worker.lines)
                assert await worker.stop() == 0
        finally:
            await admin.aclose()
    assert worker.count("reconnecting in") >= 1
    assert report.counts["accepted"] == len(expected_phones(100))


async def test_a_producer_stopped_mid_send_stops_even_if_redis_swallows_the_cancellation(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On Python 3.11, redis' pool and timeouts can swallow the cancellation
    of a command: a submit cancelled while it enqueued a chunk went on to
    read its next input, and waited for ever on an input that never came
    (CI's ``test_restarted_producer``). The cancellation ends the send at once."""
    broker: Any = broker_from(redis_url, queue=unique_name("ck-test-"))

    async def send_swallowing_its_cancellation(self: Any, message: Any) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        # Carried on as if never cancelled.

    monkeypatch.setattr(RedisStreamBroker, "kick", send_swallowing_its_cancellation)
    sent_on = asyncio.Event()

    async def submit() -> None:
        await broker.kick(object())
        sent_on.set()
        await asyncio.Event().wait()  # the next input, which never comes

    submitting = asyncio.create_task(submit())
    await asyncio.sleep(0.1)
    submitting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(submitting, 5)
    assert not sent_on.is_set()
    await broker.shutdown()
