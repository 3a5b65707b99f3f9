"""Which ledger a worker is on: a worker never creates one, and leaves the
chunks of another ledger on the queue for that ledger's workers (never
acknowledges them away); on the real Redis, PostgreSQL and the sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers import real_servers
from helpers.cli import run
from helpers.ledgers import people
from helpers.workers import producer, unique_name

from campaignkit.cli.context import ExitStatus
from campaignkit.ledger import PLANNED, PostgresLedger, WrongLedger, ledger_from
from campaignkit.ledger._postgres import redact_dsn
from campaignkit.sandbox import Sandbox
from campaignkit.workers import BulkWorkers, broker_from, send_chunk

pytestmark = pytest.mark.timeout(60)

USERS = 300
CHUNK = 50
PASSWORD = "s3cret-of-the-wrong-ledger"


def users(count: int) -> list[dict[str, str]]:
    return [{"country_code": "+57", "cellphone": f"300{n:07d}"} for n in range(count)]


async def first_poll(sb: Sandbox) -> int:
    async with sb.client() as client:
        return (await client.list_polls())[0].id


@pytest.fixture
async def other_dsn() -> AsyncIterator[str]:
    """Another ledger's DSN (a schema of its own), with a password in it
    (the test server trusts, and ignores it): no line may show it."""
    async for dsn in real_servers.fresh_postgres_schema():
        with_password, replaced = re.subn(r"://([^:@/]+)@", rf"://\1:{PASSWORD}@", dsn)
        if not replaced:
            pytest.skip("the test PostgreSQL DSN has a password of its own already")
        yield with_password


@contextlib.asynccontextmanager
async def worker(redis_url: str, queue: str, ledger: str, sb: Sandbox) -> AsyncIterator[None]:
    """An in-process worker on ``ledger``; stopped on exit."""
    stop = asyncio.Event()
    bulk = BulkWorkers(broker_from(redis_url, queue=queue), ledger, client=sb.client)
    task = asyncio.create_task(bulk.work(concurrency=2, stop=stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


async def wait_for(condition: object, seconds: float) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not callable(condition) or not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_worker_on_another_ledger_leaves_the_chunks_to_the_right_one(
    sb: Sandbox, postgres_dsn: str, other_dsn: str, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the wrong worker acknowledged every chunk away (the run stayed
    planned for good, and the right worker found nothing). Now it leaves
    them, says which ledger they need and which it has, and the right worker
    sends the run: everyone exactly once."""
    caplog.set_level(logging.WARNING, logger="campaignkit.workers")
    queue = unique_name("ck-ledgerid-")
    async with ledger_from(other_dsn) as other:
        wrong_identity = other.identity
    poll = await first_poll(sb)
    async with (
        worker(redis_url, queue, other_dsn, sb),
        producer(redis_url, queue, postgres_dsn) as bulk,
    ):
        run = await bulk.submit(poll, users(USERS), run="spring", chunk_size=CHUNK)
        await wait_for(lambda: "not claimed" in caplog.text, 20)
        # A while alone on the queue: it has taken every chunk, and sent none.
        await asyncio.sleep(1.0)
        assert (await bulk.counts(run))[PLANNED] == USERS
        async with worker(redis_url, queue, postgres_dsn, sb):
            report = await bulk.wait(run, poll_interval=0.05, timeout=30)
    async with PostgresLedger(postgres_dsn) as right:
        right_identity = right.identity
    assert report.counts["accepted"] == USERS
    received: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    assert len(received) == USERS
    assert set(received.values()) == {1}
    left = [r.getMessage() for r in caplog.records if "not claimed" in r.getMessage()]
    # One line for the run (the chunks it met again are DEBUG).
    assert len(left) == 1
    assert f"belongs to ledger {right_identity}" in left[0]
    assert f"this worker's ledger PostgresLedger('{redact_dsn(other_dsn)}')" in left[0]
    assert f"is ledger {wrong_identity}" in left[0]
    assert "left on the queue for a worker of that ledger" in left[0]
    assert PASSWORD not in caplog.text
    async with ledger_from(other_dsn) as other:
        assert await other.runs() == []


async def test_send_chunk_of_another_ledger_claims_nothing(sb: Sandbox, tmp_path: Path) -> None:
    """The coroutine any engine's task awaits: another ledger's identity, or
    a run this ledger does not hold (a message of a release before
    identities), is WrongLedger before anything is claimed."""
    async with ledger_from(tmp_path / "run.db") as ledger, sb.client() as client:
        await ledger.start_run("spring", str(await first_poll(sb)))
        await ledger.plan("spring", "c1", people(3))
        with pytest.raises(
            WrongLedger, match=f"this worker's ledger .* is ledger {ledger.identity}"
        ):
            await send_chunk(client, ledger, "spring", "c1", ledger_identity="another")
        with pytest.raises(WrongLedger, match="no run named 'autumn'"):
            await send_chunk(client, ledger, "autumn", "c1", ledger_identity=ledger.identity)
        assert (await ledger.counts("spring"))[PLANNED] == 3


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_a_worker_never_creates_its_ledger(
    sb: Sandbox, store: str, tmp_path: Path, postgres_dsn: str, redis_url: str
) -> None:
    """Before: `worker --journal typo.db` created an empty ledger and said ready."""
    journal = str(tmp_path / "typo.db") if store == "sqlite" else postgres_dsn
    argv = ("worker", "--broker", redis_url, "--queue", unique_name("ck-ledgerid-"))
    result = await run(sb, *argv, "--journal", journal)
    assert result.code == ExitStatus.NO_LEDGER, result.err
    assert "ready" not in result.err
    if store == "sqlite":
        assert f"no ledger at '{journal}': the file does not exist" in result.err
        assert not os.listdir(tmp_path)
    else:
        assert f"no ledger in {redact_dsn(journal)}: its schema" in result.err
        with pytest.raises(Exception, match="no campaignkit tables"):
            async with ledger_from(journal, create=False):
                pass
