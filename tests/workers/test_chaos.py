"""Chaos on the real servers: a 20,000-user run across 3 ``campaignkit
worker`` processes while their Redis connections are killed and their
PostgreSQL sessions terminated (only this test's own), one worker gets
SIGKILL and the producer SIGINT (then it is run again to finish).

Afterwards every phone was received at most once (the sandbox's records),
every recipient of the input is in exactly one final ledger state, and the
surviving workers are still running. The figures are printed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from helpers.bulk_child import expected_phones
from helpers.processes import run_process
from helpers.workers import (
    Worker,
    kill_redis_clients,
    terminate_postgres,
    unique_name,
    with_application_name,
    worker_process,
)

from campaignkit.ledger import (
    ACCEPTED,
    AMBIGUOUS,
    IN_FLIGHT,
    PLANNED,
    STATES,
    Ledger,
    PostgresLedger,
)
from campaignkit.ledger._sql import SqlStore
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(180)

USERS = 20_000
CHUNK = 200
PRODUCER = Path(__file__).parents[1] / "helpers" / "chaos_producer.py"
# Short claims and redeliveries, so that the killed worker's chunks are
# settled (ambiguous) or sent by the others within seconds.
FAST = ("--concurrency", "2", "--claim-ttl", "3", "--redeliver-after", "1")
LATE = {"kind": "latency", "seconds": 0.2, "route": "send_campaign", "when": "after"}


async def first_poll(sb: Sandbox) -> int:
    async with sb.client() as client:
        return (await client.list_polls())[0].id


async def until(condition: Callable[[], Awaitable[bool]], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {timeout:g} s: {what}")


async def senders(ledger: Ledger, run: str, since: float) -> set[int]:
    """The pids of the workers holding claims in flight taken after ``since``
    (UNIX seconds; owners are host:pid:random)."""
    assert isinstance(ledger.store, SqlStore)
    async with ledger.store.connection() as tx:
        rows = await tx.fetch(
            "SELECT owner FROM campaignkit_claims"
            " WHERE run = ? AND state = 'in_flight' AND claimed > ?",
            run,
            since,
        )
    return {int(owner.split(":")[1]) for (owner,) in rows}


async def interrupted(producer: asyncio.subprocess.Process) -> bytes:
    """The producer's output once its SIGINT has stopped it; if it has not
    within 60 s, the stacks of its tasks in the failure."""
    try:
        out, _ = await asyncio.wait_for(producer.communicate(), 60)
    except TimeoutError:
        producer.send_signal(signal.SIGUSR1)
        await asyncio.sleep(2)
        producer.kill()
        await producer.wait()
        assert producer.stderr is not None
        stacks = (await producer.stderr.read()).decode(errors="replace")
        raise AssertionError(f"the producer hangs after its SIGINT:\n{stacks[-6000:]}") from None
    return out


async def cut_connections(
    redis_url: str, queue: str, dsn: str, name: str, kills: Counter[str]
) -> None:
    """Kill the run's Redis connections and terminate its ledger sessions, in turn, for ever."""
    while True:
        await asyncio.sleep(0.4)
        kills["redis connections"] += await kill_redis_clients(redis_url, queue)
        await asyncio.sleep(0.4)
        kills["postgres sessions"] += await terminate_postgres(dsn, name)


async def test_chaos(
    sb: Sandbox, postgres_dsn: str, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    queue, name, run = unique_name("ck-chaos-"), unique_name("ck_chaos_"), "chaos"
    dsn = with_application_name(postgres_dsn, name)
    poll = str(await first_poll(sb))
    # Each request waits 0.2 s before the sandbox takes it: claims stay in
    # flight meanwhile.
    await sb.set_faults(LATE)
    env = {**os.environ, "PYTHONPATH": str(PRODUCER.parents[1])}
    argv = (sys.executable, str(PRODUCER), redis_url, queue, dsn, poll, run, str(USERS), str(CHUNK))
    kills: Counter[str] = Counter()
    async with contextlib.AsyncExitStack() as stack, PostgresLedger(postgres_dsn) as ledger:
        workers: list[Worker] = [
            await stack.enter_async_context(worker_process(sb, redis_url, queue, dsn, *FAST))
            for _ in range(3)
        ]

        chaos = asyncio.create_task(cut_connections(redis_url, queue, postgres_dsn, name, kills))
        try:
            # It stops reading at two fifths of its input, however slow the machine.
            producer = await asyncio.create_subprocess_exec(
                *argv,
                str(2 * USERS // 5),
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )

            # The producer interrupted a fifth of the way through its input...
            async def a_fifth_planned() -> bool:
                if producer.returncode is not None:
                    out, err = await producer.communicate()
                    raise AssertionError(f"the producer exited early: {(out + err).decode()}")
                counts = await ledger.counts(run)
                return sum(counts[s] for s in STATES) >= USERS // 5

            await until(a_fifth_planned, "the producer planned a fifth")
            producer.send_signal(signal.SIGINT)
            out = await interrupted(producer)
            assert b"input read" not in out, "the producer finished before its SIGINT"
            kills["producer SIGINT"] += 1
            # ... run again to finish, and one worker killed meanwhile, while a
            # request of its is under way.
            rerun = asyncio.create_task(run_process(*argv, env=env, timeout=120))
            pids = {worker.process.pid: worker for worker in workers}
            victim: list[Worker] = []

            # Answers 2 s late meanwhile: a request claimed from now on is
            # surely still under way when its worker is killed, however loaded
            # the machine (0.2 s could pass between seeing it and the kill).
            await sb.set_faults({**LATE, "seconds": 2.0})
            since = time.time()

            async def one_sending() -> bool:
                found = await senders(ledger, run, since)
                victim.extend(pids[pid] for pid in found if pid in pids)
                return bool(victim)

            await until(one_sending, "a worker with a request under way")
            victim[0].process.send_signal(signal.SIGKILL)
            kills["worker SIGKILL"] += 1
            await sb.set_faults(LATE)
            finished = await rerun
            assert "input read" in finished.out, finished.err

            async def done() -> bool:
                await ledger.expire(run)
                info = await ledger.run_info(run)
                counts = await ledger.counts(run)
                return bool(info and info.input_done and not counts[PLANNED] + counts[IN_FLIGHT])

            try:
                await until(done, "every recipient settled", timeout=120)
            except AssertionError as e:
                counts = await ledger.counts(run)
                tails = [
                    "\n".join([line for line in w.lines if "lost the broker" not in line][-40:])
                    for w in workers
                ]
                raise AssertionError(f"{e}: {dict(counts)}\n" + "\n---\n".join(tails)) from None
        finally:
            chaos.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await chaos
        survivors = [worker for worker in workers if worker is not victim[0]]
        assert all(w.alive for w in survivors), [w.lines[-5:] for w in survivors]
        states = {record.phone: record.state async for record in ledger.records(run)}
        counts = await ledger.counts(run)
        codes = [await worker.stop() for worker in survivors]
    received: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    duplicates = sum(n - 1 for n in received.values())
    reconnects = sum(w.count("reconnecting in") for w in workers)
    seconds = time.monotonic() - started
    # Past pytest's capture: CI's log shows the figures of a passing run too.
    with capsys.disabled():
        print(
            f"\nchaos: users={USERS} recipients={len(states)} sends={sum(received.values())} "
            f"duplicates={duplicates} accepted={counts[ACCEPTED]} ambiguous={counts[AMBIGUOUS]} "
            f"kills={dict(kills)} reconnects={reconnects} seconds={seconds:.1f}"
        )
    assert duplicates == 0
    # Every recipient of the input in exactly one final state.
    assert set(states) == expected_phones(USERS)
    assert set(states.values()) <= {ACCEPTED, AMBIGUOUS}
    assert counts[AMBIGUOUS] >= 1  # the killed worker's request: never resent
    assert counts[ACCEPTED] + counts[AMBIGUOUS] == len(states)
    # Accepted means received; nobody outside the input received anything.
    assert {phone for phone, s in states.items() if s == ACCEPTED} <= set(received)
    assert set(received) <= set(states)
    assert codes == [0, 0]
    assert kills["redis connections"] >= 1
    assert kills["postgres sessions"] >= 1
    assert reconnects >= 1
