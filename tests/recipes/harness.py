"""One run of a task-engine recipe on the real servers, a worker killed mid-request.

Two worker processes of the recipe (each a process group: Celery's and
Dramatiq's spawn children) send a 5,000-user run planned by the recipe's own
producer, through the test's sandbox over HTTP, with the ledger in a fresh
PostgreSQL schema. Once a request of one worker has reached the sandbox and
is waiting for its answer, that worker's whole group gets SIGKILL and another
worker is started. Then every valid user was received exactly once, the
ledger's report accounts for every input, and each process claimed under one
name (it opened its client and ledger once).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import asyncpg
import attrs
import pika  # type: ignore[import-untyped]
from helpers.bulk_child import expected_phones
from helpers.cli import sandbox_env
from helpers.processes import run_process

from campaignkit.ledger import ACCEPTED, AMBIGUOUS, IN_FLIGHT, PLANNED, PostgresLedger
from campaignkit.sandbox import Sandbox

RECIPES = Path(__file__).resolve().parents[2] / "examples" / "recipes"
TESTS = Path(__file__).resolve().parents[1]
PRODUCER = Path(__file__).with_name("producer.py")
USERS = 5_000
CHUNK = 100
CLAIM_TTL = 3.0  # the killed worker's claim is reported ambiguous within seconds
# Answers a little late: the run takes seconds, so that it is still under way
# when the answers are slowed down further.
LATE = {"kind": "latency", "seconds": 0.2, "route": "send_campaign", "when": "after"}
# Processed at once, answered 2 s late: a request seen at the sandbox is
# surely still waiting for its answer when its worker is killed.
SLOW = {**LATE, "seconds": 2.0}


async def _nothing_to_forget(name: str) -> None:
    return None


@attrs.frozen
class Engine:
    """How to run one recipe: its module, a new worker's command (the recipe
    reads its queue from the environment), the line a started worker logs,
    and its broker."""

    module: str
    worker: Callable[[], tuple[str, ...]]
    ready: str
    broker_url: str
    path: tuple[str, ...] = ()
    """Directories put before the environment's packages (arq's own Redis client)."""
    settings: Mapping[str, str] = attrs.field(factory=dict)
    """More of the recipe's ``CAMPAIGNS_*`` variables."""
    bounced: str = ""
    """What a worker logs when it gives a message back to the queue for later."""
    forget: Callable[[str], Awaitable[None]] = _nothing_to_forget
    """Removes what the queue and run of a name left in the broker."""


class WorkerGroup:
    """A recipe's worker in a process group of its own, and its output so far."""

    def __init__(self, process: asyncio.subprocess.Process, ready: str) -> None:
        self.process = process
        self.lines: list[str] = []
        self.ready = asyncio.Event()
        self._marker = ready
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if self._marker in line:
                self.ready.set()

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def freeze(self) -> None:
        """SIGSTOP the whole group: it claims and sends nothing until thawed."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    async def stop(self) -> int:
        """SIGTERM, as a deployment stops it (its processes close their state); the exit status."""
        if self.process.returncode is None:
            self.process.terminate()
        try:
            code = await asyncio.wait_for(self.process.wait(), 30)
        finally:
            self.kill()  # whatever of the group is left
        await asyncio.wait_for(self._reader, 5)
        return code

    def count(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    def tail(self) -> str:
        return "\n".join(self.lines[-30:])


def recipe_env(sb: Sandbox, engine: Engine, dsn: str, queue: str) -> dict[str, str]:
    path = [*engine.path, str(RECIPES), str(TESTS), os.environ.get("PYTHONPATH", "")]
    return {
        **sandbox_env(sb),
        "PYTHONPATH": os.pathsep.join(p for p in path if p),
        "CAMPAIGNS_BROKER_URL": engine.broker_url,
        "CAMPAIGNS_LEDGER_DSN": dsn,
        "CAMPAIGNS_QUEUE": queue,
        "CAMPAIGNS_CLAIM_TTL": str(CLAIM_TTL),
        **engine.settings,
    }


@contextlib.asynccontextmanager
async def worker_group(
    engine: Engine, env: dict[str, str], queue: str
) -> AsyncIterator[WorkerGroup]:
    """A started worker of ``engine``; its whole group killed on exit."""
    process = await asyncio.create_subprocess_exec(
        *engine.worker(),
        cwd=RECIPES,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    group = WorkerGroup(process, engine.ready)
    try:
        ready = asyncio.create_task(group.ready.wait())
        exited = asyncio.create_task(process.wait())
        await asyncio.wait([ready, exited], timeout=30, return_when="FIRST_COMPLETED")
        ready.cancel()
        exited.cancel()
        assert group.ready.is_set(), f"the worker did not start:\n{group.tail()}"
        yield group
    finally:
        group.kill()
        await process.wait()


async def until(
    condition: Callable[[], Awaitable[bool]],
    what: str,
    timeout: float,
    workers: Sequence[WorkerGroup],
) -> None:
    """Wait for ``condition``; past ``timeout``, fail with the workers' last lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await condition():
            return
        await asyncio.sleep(0.05)
    tails = "\n---\n".join(worker.tail() for worker in workers)
    raise AssertionError(f"not within {timeout:g} s: {what}\n{tails}")


async def in_flight(dsn: str, run: str, since: float) -> dict[int, set[str]]:
    """The phones of the claims in flight taken after ``since`` (UNIX
    seconds), by the pid of the process holding them (owners are host:pid)."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT c.owner, r.phone FROM campaignkit_claims c"
            # A claim's recipients: its chunk's planned rows (see campaignkit.ledger._sql_tx).
            " JOIN campaignkit_recipients r ON r.run = c.run AND r.chunk = c.chunk"
            " AND r.state = 'planned'"
            " WHERE c.run = $1 AND c.state = 'in_flight' AND c.claimed > $2",
            run,
            since,
        )
    finally:
        await conn.close()
    held: dict[int, set[str]] = {}
    for owner, phone in rows:
        held.setdefault(int(owner.split(":")[1]), set()).add(phone)
    return held


async def held_by_group(dsn: str, run: str, since: float) -> dict[int, set[str]]:
    """:func:`in_flight`'s phones by the process group (its leader's pid) of
    the process holding them: a worker's children claim as it does."""
    held: dict[int, set[str]] = {}
    for pid, phones in (await in_flight(dsn, run, since)).items():
        with contextlib.suppress(ProcessLookupError):
            held.setdefault(os.getpgid(pid), set()).update(phones)
    return held


async def claim_owners(dsn: str, run: str) -> set[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT DISTINCT owner FROM campaignkit_claims WHERE run = $1", run)
    finally:
        await conn.close()
    return {owner for (owner,) in rows}


async def received(sb: Sandbox) -> dict[str, int]:
    counts: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    return counts


async def send_with_a_worker_killed(sb: Sandbox, engine: Engine, postgres_dsn: str) -> str:
    """The run's figures, once every assertion has held."""
    # The run's name and its queue's, new to the shared broker.
    name = f"ck-recipe-{uuid.uuid4().hex[:12]}"
    try:
        return await _send(sb, engine, postgres_dsn, name, name)
    finally:
        await engine.forget(name)


async def _send(sb: Sandbox, engine: Engine, postgres_dsn: str, run: str, queue: str) -> str:
    started = time.monotonic()
    env = recipe_env(sb, engine, postgres_dsn, queue)
    async with sb.client() as client:
        poll = str((await client.list_polls())[0].id)
    await sb.set_faults(LATE)
    producer_argv = (
        sys.executable,
        str(PRODUCER),
        engine.module,
        poll,
        run,
        str(USERS),
        str(CHUNK),
    )
    async with contextlib.AsyncExitStack() as stack:
        workers = [
            await stack.enter_async_context(worker_group(engine, env, queue)) for _ in range(2)
        ]
        producing = asyncio.create_task(run_process(*producer_argv, env=env, timeout=90))
        # Let the run get under way before slowing the answers down.
        await until(lambda: _accepted_at_least(sb, 5 * CHUNK), "five chunks received", 60, workers)
        await sb.set_faults(SLOW)
        since = time.time()
        victim: list[WorkerGroup] = []

        async def a_request_waiting() -> bool:
            # A worker whose every claim in flight the sandbox has taken, one
            # of them since the answers were slowed: its recipients are
            # received once, whatever becomes of the worker. It is judged
            # frozen, so that it claims nothing between the look and the
            # kill (a claim never sent would end ambiguous, never received).
            for group in workers:
                group.freeze()
                try:
                    leader = group.process.pid
                    held = (await held_by_group(postgres_dsn, run, 0.0)).get(leader, set())
                    recent = (await held_by_group(postgres_dsn, run, since)).get(leader)
                    if recent and held <= set(await received(sb)):
                        victim.append(group)
                        return True
                finally:
                    if not victim:
                        group.thaw()
            return False

        await until(a_request_waiting, "a worker with a request under way", 60, workers)
        victim[0].kill()
        await sb.set_faults(LATE)
        workers.append(await stack.enter_async_context(worker_group(engine, env, queue)))
        produced = await producing
        assert "input read" in produced.out, produced.err

        async with PostgresLedger(postgres_dsn) as ledger:

            async def settled() -> bool:
                # Only the killed worker's claim is left to expire: a survivor's,
                # expired under load while its request waits, would be settled
                # ambiguous by the test and its worker stopped mid-chunk.
                survivors = {w.process.pid for w in workers if w is not victim[0]}
                if survivors & set(await held_by_group(postgres_dsn, run, 0.0)):
                    return False
                await ledger.expire(run)
                info = await ledger.run_info(run)
                counts = await ledger.counts(run)
                return bool(info and info.input_done and not counts[PLANNED] + counts[IN_FLIGHT])

            await until(settled, "every recipient settled", 90, workers)
            report = await ledger.report(run)
            states = {record.phone: record.state async for record in ledger.records(run)}
        survivors = [w for w in workers if w is not victim[0]]
        codes = [await w.stop() for w in survivors]
    owners = await claim_owners(postgres_dsn, run)
    phones = await received(sb)

    assert {n for n in phones.values()} == {1}, "a phone received twice"
    expected = expected_phones(USERS)
    missing = expected - set(phones)
    assert set(phones) == expected, (
        f"{len(missing)} never received, in the ledger as "
        f"{Counter(states.get(phone, 'absent') for phone in missing)}; "
        f"{len(set(phones) - expected)} received unexpected"
    )
    assert set(states) == set(phones)
    assert set(states.values()) == {ACCEPTED, AMBIGUOUS}  # ambiguous: the killed request
    assert report.total == USERS
    counts = report.counts
    assert counts["accepted"] + counts["ambiguous"] == len(phones)
    assert counts["invalid"] + counts["duplicate"] == USERS - len(phones)
    assert counts["rejected"] == counts["deferred"] == counts["suppressed"] == 0
    # One name per process: each opened its client and ledger once.
    pids = [owner.split(":")[1] for owner in owners]
    assert len(pids) == len(set(pids)), owners
    assert codes == [0] * len(survivors), "\n---\n".join(w.tail() for w in survivors)
    # No task failed (and was retried) on the way.
    assert not [line for w in survivors for line in w.lines if "Traceback" in line], [
        w.tail() for w in survivors
    ]
    return (
        f"{engine.module}: users={USERS} received={len(phones)} accepted={counts['accepted']} "
        f"ambiguous={counts['ambiguous']} processes={len(owners)} "
        f"seconds={time.monotonic() - started:.1f}"
    )


async def send_past_another_ledger(
    sb: Sandbox, engine: Engine, postgres_dsn: str, other_dsn: str
) -> None:
    """A worker given another ledger than the producer's takes the run's
    first messages alone: it gives each back to the queue, claiming and
    sending nothing. Once a worker of the right ledger is started, every
    user is received exactly once."""
    name = f"ck-recipe-{uuid.uuid4().hex[:12]}"
    try:
        await _send_past(sb, engine, postgres_dsn, other_dsn, name)
    finally:
        await engine.forget(name)


async def _send_past(
    sb: Sandbox, engine: Engine, postgres_dsn: str, other_dsn: str, name: str
) -> None:
    users = 3 * CHUNK
    async with sb.client() as client:
        poll = str((await client.list_polls())[0].id)
    env = recipe_env(sb, engine, postgres_dsn, name)
    producer_argv = (sys.executable, str(PRODUCER), engine.module, poll, name, str(users))
    async with contextlib.AsyncExitStack() as stack:
        stray = await stack.enter_async_context(
            worker_group(engine, {**env, "CAMPAIGNS_LEDGER_DSN": other_dsn}, name)
        )
        produced = await run_process(*producer_argv, str(CHUNK), env=env, timeout=60)
        assert "input read" in produced.out, produced.err

        async def bounced() -> bool:
            return stray.count(engine.bounced) >= 1

        await until(bounced, "the stray worker gave a message back", 60, [stray])
        assert not await received(sb)
        right = await stack.enter_async_context(worker_group(engine, env, name))
        async with PostgresLedger(postgres_dsn) as ledger:

            async def settled() -> bool:
                counts = await ledger.counts(name)
                return not counts[PLANNED] + counts[IN_FLIGHT]

            await until(settled, "every recipient settled", 90, [stray, right])
            states = {record.phone: record.state async for record in ledger.records(name)}
        async with PostgresLedger(other_dsn) as other:
            assert await other.run_info(name) is None
        codes = [await stray.stop(), await right.stop()]
    phones = await received(sb)
    assert set(phones.values()) == {1}
    assert set(phones) == set(states) == expected_phones(users)
    assert set(states.values()) == {ACCEPTED}
    assert codes == [0, 0], stray.tail()


async def _accepted_at_least(sb: Sandbox, count: int) -> bool:
    return len(await received(sb)) >= count


async def delete_rabbitmq_queues(url: str, *names: str) -> None:
    def delete() -> None:
        connection = pika.BlockingConnection(pika.URLParameters(url))
        try:
            channel = connection.channel()
            for name in names:
                channel.queue_delete(name)
        finally:
            connection.close()

    await asyncio.to_thread(delete)
