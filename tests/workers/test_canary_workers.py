"""A canary across workers, end to end (3 ``campaignkit worker`` processes,
real Redis and PostgreSQL, the sandbox): ``submit`` hands the canary alone
to the workers, follows and judges it; one that fails pauses the run for
every worker, nothing beyond it sent, and the resumed run's next submit
sends the rest exactly once; one that holds lets the whole run go, each
person once, the canary first."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from helpers.workers import worker_fleet

from campaignkit import Canary, DeploymentStatus, User
from campaignkit.ledger import ACCEPTED, PLANNED, PostgresLedger
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(180)

# Long enough for a loaded machine (3.13 under a full suite delivered 10 of 20 within
# 30 s): a canary that holds goes as soon as its shares are known, not at the wait.
CANARY = Canary(size=20, wait=timedelta(seconds=75), min_delivered=0.8, max_failed=0.05)
CHUNK = 10
WORKERS = 3


def people(count: int, prefix: str = "31") -> list[User]:
    return [User(cellphone=f"{prefix}{n:08d}", country_code="+57") for n in range(count)]


async def phone_counts(sb: Sandbox) -> Counter[str]:
    return Counter((await sb.snapshot())["companies"][0]["phone_counts"])


async def test_a_failing_canary_stops_every_worker(
    sb: Sandbox, postgres_dsn: str, redis_url: str
) -> None:
    await sb.fail_prefix("+5732", rate=1.0, status=DeploymentStatus.FAILURE_BY_UNABLE_TO_CONTACT)
    canary = people(5, prefix="32") + people(15)
    users = canary + people(180, prefix="34")
    async with sb.client() as client:
        poll = (await client.list_polls())[0].id
    async with worker_fleet(sb, redis_url, postgres_dsn, "ck-canary-", WORKERS) as bulk:
        run = await bulk.submit(poll, users, run="risky", chunk_size=CHUNK, canary=CANARY)
        # Returned once judged: the canary alone was sent, by the workers.
        assert set(await phone_counts(sb)) == {f"+57{u.cellphone}" for u in canary}
        async with PostgresLedger(postgres_dsn) as ledger:
            info = await ledger.run_info(run)
            assert info is not None
            assert info.paused is not None
            assert info.paused.reason == "canary"
            assert info.paused.detail.startswith("25% of 20 canary recipients failed (5)")
            counts = await ledger.counts(run)
            assert (counts[ACCEPTED], counts[PLANNED]) == (20, 180)
            report = await bulk.wait(run, poll_interval=0.1, timeout=30)
            assert report.paused is not None
            assert report.paused.startswith("canary: 25% of 20")
            # Resumed by a person: the next submit hands the rest over, sent once.
            await sb.clear_failures()
            assert await ledger.resume_run(run) == 180
        await bulk.submit(poll, users, run=run, chunk_size=CHUNK, canary=CANARY)
        last = await bulk.wait(run, poll_interval=0.1, timeout=60)
        assert last.paused is None
        assert last.counts["accepted"] == 200
    sent = await phone_counts(sb)
    assert len(sent) == 200
    assert set(sent.values()) == {1}


async def test_a_canary_that_holds_lets_the_workers_send_every_one_once(
    sb: Sandbox, postgres_dsn: str, redis_url: str
) -> None:
    users = people(200)
    async with sb.client() as client:
        poll = (await client.list_polls())[0].id
    async with worker_fleet(sb, redis_url, postgres_dsn, "ck-canary-", WORKERS) as bulk:
        run = await bulk.submit(poll, users, run="safe", chunk_size=CHUNK, canary=CANARY)
        report = await bulk.wait(run, poll_interval=0.1, timeout=60)
    assert report.paused is None
    assert report.counts["accepted"] == 200
    sent = await phone_counts(sb)
    assert len(sent) == 200
    assert set(sent.values()) == {1}
    # The canary's two chunks were the first two launches, the rest after them.
    launches = (await sb.snapshot())["companies"][0]["launches"]
    first = {u["cellphone"] for launch in launches[:2] for u in launch["users"]}
    assert first == {u.cellphone for u in users[: CANARY.size]}
