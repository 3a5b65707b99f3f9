"""A fatal answer ends a run over workers as it ends ``send_bulk``: the poll
deleted mid-run, the first 404 is recorded on the run in the ledger, and every
worker files its later chunks rejected with that error without sending them.
Real Redis (the broker), PostgreSQL or SQLite (the ledger) and the sandbox."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from helpers.bulk_child import expected_phones, make_users
from helpers.workers import producer

from campaignkit.errors import NotFoundError
from campaignkit.ledger import ACCEPTED, PLANNED, REJECTED, ledger_from
from campaignkit.ledger._errors import error_detail
from campaignkit.sandbox import Sandbox, _app
from campaignkit.sandbox._http import ServiceError
from campaignkit.workers import BulkWorkers, broker_from, submit_run

pytestmark = pytest.mark.timeout(60)

COUNT = 2000
CHUNK = 50
WORKERS = 2
# As the ledger keeps the 404 a worker got for the deleted poll.
STOPPED = error_detail(
    NotFoundError(404, "POST", "http://c.test/v2/send-campaign/1", "Poll 1 not found.")
)


@pytest.fixture(params=["postgres", "sqlite"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "run.db")
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


class Refusals:
    """The sandbox's poll lookups that answered 404: one per request sent for the deleted poll."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self._lookup = _app._poll_id
        monkeypatch.setattr(_app, "_poll_id", self.poll_id)

    def poll_id(self, company: object, raw: object) -> int:
        try:
            return self._lookup(company, raw)  # type: ignore[arg-type]
        except ServiceError:
            self.count += 1
            raise


async def test_the_first_404_ends_the_run_for_every_worker(
    sb: Sandbox, journal: str, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusals = Refusals(monkeypatch)
    queue = f"campaignkit-test-{uuid.uuid4().hex[:12]}"
    company = sb.world.default
    poll = next(iter(company.polls))
    # Each request answered 50 ms after it was processed: the run lasts long
    # enough for the poll to go mid-run.
    await sb.set_faults({"kind": "latency", "seconds": 0.05, "route": "send_campaign"})
    stop = asyncio.Event()
    sides = [
        BulkWorkers(broker_from(redis_url, queue=queue), journal, client=sb.client)
        for _ in range(WORKERS)
    ]
    # One chunk at a time each: a worker sends at most one request after the
    # first fatal answer (its own, under way when another worker's came).
    working = [asyncio.create_task(side.work(concurrency=1, stop=stop)) for side in sides]
    try:
        async with producer(redis_url, queue, journal) as bulk:
            run = await bulk.submit(poll, make_users(COUNT), run="gone", chunk_size=CHUNK)
            async for progress in bulk.progress(run, poll_interval=0.01):
                if progress.states[ACCEPTED] >= 4 * CHUNK:
                    del company.polls[poll]
                    break
            report = await bulk.wait(run, poll_interval=0.05, timeout=40)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*working), 20)
    chunks = -(-len(expected_phones(COUNT)) // CHUNK)
    assert progress.states[ACCEPTED] < len(expected_phones(COUNT)) - WORKERS * CHUNK
    # The first 404, and at most one request of each other worker, under way
    # then: every later chunk was filed rejected without being sent.
    assert 1 <= refusals.count <= WORKERS < chunks // 4
    assert isinstance(report.fatal, NotFoundError)
    assert all(isinstance(chunk.error, NotFoundError) for chunk in report.rejected)
    ledger = ledger_from(journal)
    async with ledger:
        records = [record async for record in ledger.records(run)]
        info = await ledger.run_info(run)
    assert info is not None
    assert info.stopped is not None
    assert info.stopped.startswith("NotFoundError")
    # Every valid input is in exactly one state: accepted (and received), or
    # rejected with the error; the producer read the whole input all the same.
    phones = [r.phone for r in records]
    assert len(phones) == len(set(phones))
    assert set(phones) == expected_phones(COUNT)
    assert report.total == info.total == COUNT
    assert info.input_done
    assert {r.state for r in records} == {ACCEPTED, REJECTED}
    rejected = [r for r in records if r.state == REJECTED]
    assert all(r.detail == info.stopped for r in rejected)
    received = (await sb.snapshot())["companies"][0]["phone_counts"]
    assert set(received) == {r.phone for r in records if r.state == ACCEPTED}
    assert report.counts[REJECTED] == len(rejected)


async def test_once_a_worker_stops_the_run_the_producer_files_the_rest_rejected(
    journal: str,
) -> None:
    enqueued: list[str] = []
    ledger = ledger_from(journal)

    async def enqueue(run: str, chunk: str) -> None:
        enqueued.append(chunk)
        if len(enqueued) == 2:  # a worker's fatal answer to the first chunk
            await ledger.stop_run(run, STOPPED)

    async with ledger:
        run = await submit_run(
            ledger, 1, make_users(COUNT), enqueue=enqueue, run="stopped", chunk_size=CHUNK
        )
        info = await ledger.run_info(run)
        counts = await ledger.counts(run)
        rejected = [record async for record in ledger.records(run, [REJECTED])]
        report = await ledger.report(run)
    # Nothing more handed over; the two chunks enqueued are the workers' to file.
    assert len(enqueued) == 2
    assert counts[PLANNED] == 2 * CHUNK
    # The rest of the input read, planned and filed rejected with the fatal answer.
    assert counts[REJECTED] == len(rejected) == len(expected_phones(COUNT)) - 2 * CHUNK
    assert all(r.detail == STOPPED for r in rejected)
    valid, skipped = len(expected_phones(COUNT)), len(report.invalid) + len(report.duplicates)
    assert report.total == valid + skipped == COUNT
    assert info is not None
    assert (info.input_done, info.total) == (True, COUNT)
    assert info.stopped == STOPPED
