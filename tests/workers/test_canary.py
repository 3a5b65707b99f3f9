"""The canary of a run the workers send, against the sandbox: ``submit_run``
hands its first recipients alone to the workers (plain asyncio tasks
awaiting ``send_chunk``, as any task engine's), waits for them to be
settled, follows and judges them; the rest is handed over only if they hold,
otherwise it stays planned and never enqueued until the run is resumed, and
a judgement a submit left unfinished is taken up by the next one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.canaries import FAST, launches, people, stuck

from campaignkit import CampaignClient, Canary, ValidationError
from campaignkit.ledger import ACCEPTED, PLANNED, SqliteLedger
from campaignkit.sandbox import Sandbox
from campaignkit.workers import send_chunk, submit_run

pytestmark = pytest.mark.timeout(60)


class Workers:
    """Two workers on an asyncio queue: ``enqueue`` is the producer's."""

    def __init__(self, client: CampaignClient, ledger: SqliteLedger) -> None:
        self.client, self.ledger = client, ledger
        self.enqueued: list[str] = []
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()

    async def enqueue(self, run: str, chunk: str) -> None:
        self.enqueued.append(chunk)
        self._queue.put_nowait((run, chunk))

    async def work(self) -> None:
        while True:
            run, chunk = await self._queue.get()
            await send_chunk(self.client, self.ledger, run, chunk)
            self._queue.task_done()

    async def idle(self) -> None:
        """Until every message enqueued so far was taken and done."""
        await asyncio.wait_for(self._queue.join(), 20)


@contextlib.asynccontextmanager
async def workers(client: CampaignClient, ledger: SqliteLedger) -> AsyncIterator[Workers]:
    side = Workers(client, ledger)
    tasks = [asyncio.create_task(side.work()) for _ in range(2)]
    try:
        yield side
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)


async def test_a_canary_that_holds_goes_to_the_workers_alone_then_the_rest(
    sb: Sandbox, client: CampaignClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "campaignkit")
    poll = (await client.list_polls())[0].id
    async with SqliteLedger(tmp_path / "runs.db") as ledger, workers(client, ledger) as side:
        await submit_run(
            ledger,
            poll,
            people(range(100)),
            enqueue=side.enqueue,
            client=client,
            run="r",
            chunk_size=20,
            canary=FAST,
        )
        await side.idle()
        assert (await ledger.counts("r"))[ACCEPTED] == 100
        sent = await launches(sb)
        # The canary's exact size in a chunk of its own, then chunks of 20.
        assert [len(launch) for launch in sent] == [15, 20, 20, 20, 20, 5]
        # Its outcomes were followed by the producer.
        outcomes = {o.phone for o in await ledger.outcomes("r") if o.status is not None}
        assert outcomes == {f"+57{c}" for c in sent[0]}
        info = await ledger.run_info("r")
        assert info is not None
        assert info.paused is None
    # What a command line shows: the judgement announced and its verdict, no
    # "resumed (0 recipients planned)" of the pause lifted before the rest is planned.
    shown = [record.getMessage() for record in caplog.records]
    assert [line.split(": ")[1] for line in shown] == [
        "paused (canary)",
        "its canary held (100% of 15 canary recipients were delivered (15); "
        "0% of 15 canary recipients failed (0))",
    ]


async def test_a_failing_canary_stops_the_workers_and_the_resumed_run_sends_the_rest(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll = (await client.list_polls())[0].id
    await sb.fail_prefix("+5732", rate=1.0, status="FAILURE_BY_META_CHOSE_NOT_DELIVER")
    users = people(range(5), prefix="32") + people(range(45), prefix="31")
    options: dict[str, Any] = {"run": "r", "chunk_size": 20, "canary": FAST}
    async with SqliteLedger(tmp_path / "runs.db") as ledger, workers(client, ledger) as side:
        await submit_run(ledger, poll, users, enqueue=side.enqueue, client=client, **options)
        await side.idle()
        assert sum(map(len, await launches(sb))) == 15
        info = await ledger.run_info("r")
        assert info is not None
        assert info.paused is not None
        assert info.paused.reason == "canary"
        assert info.paused.detail.startswith("33.3% of 15 canary recipients failed (5)")
        # The rest is planned, never enqueued: no worker was given it.
        assert (await ledger.counts("r"))[PLANNED] == 35
        canary_chunks = list(side.enqueued)
        assert len(await ledger.unenqueued_chunks("r")) == 2
        # Paused, a submit hands nothing more over.
        await submit_run(ledger, poll, users, enqueue=side.enqueue, client=client, **options)
        assert side.enqueued == canary_chunks
        assert await ledger.resume_run("r") == 35
        # Resumed by a person: the next submit hands the rest over, not judged again.
        await asyncio.wait_for(
            submit_run(ledger, poll, users, enqueue=side.enqueue, client=client, **options), 10
        )
        await side.idle()
        assert (await ledger.counts("r"))[ACCEPTED] == 50
        info = await ledger.run_info("r")
        assert info is not None
        assert info.paused is None
    got = [c for launch in await launches(sb) for c in launch]
    assert len(got) == len(set(got)) == 50


async def test_a_judgement_a_submit_left_is_taken_up_by_the_next_submit(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll = (await client.list_polls())[0].id
    patient = Canary(size=10, wait=timedelta(minutes=10), min_delivered=0.8, max_failed=0.5)
    users = stuck(range(5)) + people(range(30))
    async with SqliteLedger(tmp_path / "runs.db") as ledger, workers(client, ledger) as side:
        submitting = asyncio.create_task(
            submit_run(
                ledger, poll, users, enqueue=side.enqueue, client=client, run="r", canary=patient
            )
        )
        for _ in range(500):  # until the canary is being judged
            info = await ledger.run_info("r")
            if info is not None and info.paused is not None:
                break
            await asyncio.sleep(0.02)
        assert info is not None
        assert info.paused is not None
        assert info.paused.detail.startswith("judging its first 10 recipients")
        submitting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await submitting
        # Left paused while judged: a submit without the canary hands nothing more over.
        enqueued = list(side.enqueued)
        await submit_run(ledger, poll, users, enqueue=side.enqueue, run="r")
        assert side.enqueued == enqueued
        # The next submit with a canary judges it, its wait counted from the pause.
        short = Canary(size=10, wait=timedelta(seconds=0.5), min_delivered=0.8, max_failed=0.5)
        await asyncio.wait_for(
            submit_run(
                ledger, poll, users, enqueue=side.enqueue, client=client, run="r", canary=short
            ),
            20,
        )
        info = await ledger.run_info("r")
        assert info is not None
        assert info.paused is not None
        assert info.paused.detail.startswith("50% of 10 canary recipients were delivered (5)")
        assert side.enqueued == enqueued
    assert sum(map(len, await launches(sb))) == 10


async def test_a_canary_sent_whole_by_the_workers_after_its_submit_stopped_is_judged_next(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll = (await client.list_polls())[0].id
    await sb.fail_prefix("+5732", rate=1.0, status="FAILURE_BY_META_CHOSE_NOT_DELIVER")
    users = people(range(5), prefix="32") + people(range(95), prefix="31")
    handed: list[str] = []

    async def hand(run: str, chunk: str) -> None:
        handed.append(chunk)

    async with SqliteLedger(tmp_path / "runs.db") as ledger:
        first = asyncio.create_task(
            submit_run(
                ledger,
                poll,
                users,
                enqueue=hand,
                client=client,
                run="r",
                chunk_size=20,
                canary=FAST,
            )
        )
        for _ in range(500):  # until the canary is handed over, its enqueueing recorded
            if handed and await ledger.unenqueued_chunks("r") == []:
                break
            await asyncio.sleep(0.02)
        # Stopped while the workers send its canary, before any judgement.
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        async with workers(client, ledger) as side:
            for chunk in handed:
                await side.enqueue("r", chunk)
            await side.idle()
            info = await ledger.run_info("r")
            assert info is not None
            assert (info.paused, info.canary_judged) == (None, None)
            # The canary is sent whole, never judged: the next submit judges it.
            await asyncio.wait_for(
                submit_run(
                    ledger,
                    poll,
                    users,
                    enqueue=side.enqueue,
                    client=client,
                    run="r",
                    chunk_size=20,
                    canary=FAST,
                ),
                20,
            )
            await side.idle()
            info = await ledger.run_info("r")
            assert info is not None
            assert info.paused is not None
            assert info.paused.detail.startswith("33.3% of 15 canary recipients failed (5)")
            assert info.canary_judged is not None
    assert sum(map(len, await launches(sb))) == 15


async def test_chunks_a_crashed_submit_never_enqueued_go_behind_the_canary(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll = (await client.list_polls())[0].id
    users = people(range(100))

    async def lost(run: str, chunk: str) -> None:
        raise ConnectionError("the broker went away")

    async with SqliteLedger(tmp_path / "runs.db") as ledger, workers(client, ledger) as side:
        # A first submit planned a chunk of 20 and died before enqueueing it.
        with pytest.raises(ConnectionError):
            await submit_run(ledger, poll, users, enqueue=lost, run="r", chunk_size=20)
        assert len(await ledger.unenqueued_chunks("r")) == 1
        await submit_run(
            ledger,
            poll,
            users,
            enqueue=side.enqueue,
            client=client,
            run="r",
            chunk_size=20,
            canary=FAST,
        )
        await side.idle()
        assert (await ledger.counts("r"))[ACCEPTED] == 100
    # Its recipients were planned again behind the gate: the canary first, alone.
    sent = await launches(sb)
    assert [len(launch) for launch in sent] == [15, 20, 20, 20, 20, 5]


async def test_a_submit_with_a_canary_needs_a_client(tmp_path: Path) -> None:
    async def enqueue(run: str, chunk: str) -> None:
        raise AssertionError("nothing is handed over")

    async with SqliteLedger(tmp_path / "runs.db") as ledger:
        with pytest.raises(ValidationError) as raised:
            await submit_run(ledger, 7, people(range(3)), enqueue=enqueue, canary=FAST)
        assert [field for field, _ in raised.value.problems] == ["client"]
        assert await ledger.runs() == []
