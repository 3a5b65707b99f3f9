"""The workers apply the run's send window, daily limit and lines, as the
producer stored them with the run (real Redis, PostgreSQL and sandbox)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

import pytest
from helpers.workers import producer

from campaignkit import SendWindow, User
from campaignkit.sandbox import Sandbox
from campaignkit.workers import BulkWorkers, broker_from

pytestmark = pytest.mark.timeout(60)


async def test_workers_send_by_the_rules_the_producer_stored(
    sb: Sandbox, postgres_dsn: str, redis_url: str
) -> None:
    queue = f"campaignkit-test-{uuid.uuid4().hex[:12]}"
    bogota = ZoneInfo("America/Bogota")
    hour = datetime.now(UTC).astimezone(bogota).hour
    closed = SendWindow(time(13), time(23)) if hour < 12 else SendWindow(time(1), time(11))
    company = (await sb.snapshot(users=False))["companies"][0]
    lines, poll = company["lines"], company["polls"][0]["id"]
    users = [User(cellphone=f"31{n:08d}", country_code="+57") for n in range(12)]
    stop = asyncio.Event()
    worker = BulkWorkers(broker_from(redis_url, queue=queue), postgres_dsn, client=sb.client)
    working = asyncio.create_task(worker.work(concurrency=2, stop=stop))
    try:
        async with producer(redis_url, queue, postgres_dsn) as bulk:
            run = await bulk.submit(
                poll, users, chunk_size=3, send_window=closed, daily_limit=8, lines=lines
            )
            report = await bulk.wait(run, timeout=30)
    finally:
        stop.set()
        await asyncio.wait_for(working, 20)
    assert (report.counts["accepted"], report.counts["deferred"]) == (8, 4)
    got = [
        user
        for launch in (await sb.snapshot())["companies"][0]["launches"]
        for user in launch["users"]
    ]
    assert len(got) == 8
    assert all(user["deployment_eta"] is not None for user in got)
    assert all(
        closed.contains(datetime.fromtimestamp(user["deployment_eta"], UTC).astimezone(bogota))
        for user in got
    )
    assert sorted(Counter(user["line"] for user in got).values()) == [4, 4]


async def test_the_producer_defers_numbers_without_a_zone_and_a_resubmit_with_a_default_sends(
    sb: Sandbox, postgres_dsn: str, redis_url: str
) -> None:
    queue = f"campaignkit-test-{uuid.uuid4().hex[:12]}"
    window = SendWindow(time(9), time(20))
    poll = (await sb.snapshot(users=False))["companies"][0]["polls"][0]["id"]
    users = [User(cellphone=f"300000000{n}", country_code="+57") for n in range(3)]
    users.append(User(cellphone="3301234567", country_code="+57"))  # no zone known
    run = f"zones-{uuid.uuid4().hex[:8]}"
    stop = asyncio.Event()
    worker = BulkWorkers(broker_from(redis_url, queue=queue), postgres_dsn, client=sb.client)
    working = asyncio.create_task(worker.work(concurrency=2, stop=stop))
    try:
        async with producer(redis_url, queue, postgres_dsn) as bulk:
            await bulk.submit(poll, users, run=run, chunk_size=2, send_window=window)
            first = await bulk.wait(run, timeout=30)
            await bulk.submit(
                poll, users, run=run, chunk_size=2, send_window=window, default_tz="America/Bogota"
            )
            second = await bulk.wait(run, timeout=30)
    finally:
        stop.set()
        await asyncio.wait_for(working, 20)
    assert first.counts["accepted"] == 3
    assert first.deferred_reasons == {"zone unknown": 1}
    assert (second.counts["accepted"], second.counts["deferred"]) == (4, 0)
    got = [
        user
        for launch in (await sb.snapshot())["companies"][0]["launches"]
        for user in launch["users"]
    ]
    assert sorted(user["cellphone"] for user in got) == sorted(u.cellphone for u in users)
    bogota = ZoneInfo("America/Bogota")
    unzoned = next(user for user in got if user["cellphone"] == "3301234567")
    if unzoned["deployment_eta"] is not None:
        at = datetime.fromtimestamp(unzoned["deployment_eta"], UTC)
        assert window.contains(at.astimezone(bogota))
