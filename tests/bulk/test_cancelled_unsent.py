"""A bulk send interrupted while its request waits to be retried after a 429
(refused without effect, by the spec), or before it was built, leaves its
recipients planned, for the run's next send to take, not ambiguous;
interrupted while the request is under way, they stay ambiguous. On the I/O
seam's fake, every ledger."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from helpers.exchange import Reply, ScriptedExchange
from helpers.ledgers import CONFORMING, NewLedger, ledger_factory

from campaignkit import CampaignClient, ProgressUpdate, User
from campaignkit.ledger import ACCEPTED, AMBIGUOUS, IN_FLIGHT, PLANNED
from campaignkit.testing import FakeTime, Request

pytestmark = pytest.mark.timeout(30)

SEND = re.compile(r"^http://campaign\.test/v2/send-campaign/7$")
RUN = "poll-7"
USERS = [User(cellphone=f"555{i:07d}", country_code="+1") for i in range(10)]
ACK = {
    "message": "queued",
    "id": "7",
    "batch_id": "b1",
    "launch_request_id": "lr-1",
    "status_url": "/v2/send-campaign/lr-1",
}


@pytest.fixture(params=CONFORMING)
def new_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> NewLedger:
    return ledger_factory(request, tmp_path)


@pytest.mark.parametrize(
    ("cut", "left"),
    [("building the request", PLANNED), ("waiting to retry", PLANNED), ("in flight", AMBIGUOUS)],
)
async def test_an_interrupt_settles_a_request_by_where_it_was(
    new_ledger: NewLedger, cut: str, left: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mocked = ScriptedExchange()
    reached = asyncio.Event()

    async def for_ever(*_: object) -> None:
        reached.set()
        await asyncio.Event().wait()

    async def in_flight(request: Request) -> Reply:
        await for_ever()
        raise AssertionError("never answered")

    if cut == "waiting to retry":
        mocked.post(SEND, status=429, headers={"Retry-After": "30"}, payload={"detail": "slow"})
    else:
        mocked.post(SEND, callback=in_flight)
    # The request's users get their sending line from the ledger.
    lines = ["573000000001"] if cut == "building the request" else None
    updates: list[ProgressUpdate] = []
    async with (
        CampaignClient(
            "sk_tst_cancel_0123456789", campaign_url="http://campaign.test", exchange=mocked
        ) as client,
        new_ledger() as ledger,
    ):
        client.transport.sleep = for_ever  # the wait before the retry: until interrupted
        with monkeypatch.context() as patched:
            if lines:
                patched.setattr(ledger, "assign_lines", for_ever)
            sending = asyncio.create_task(
                client.send_bulk(
                    7,
                    USERS,
                    chunk_size=10,
                    journal=ledger,
                    interrupt_grace=0.05,
                    on_progress=updates.append,
                    lines=lines,
                )
            )
            await asyncio.wait_for(reached.wait(), 5)
            sending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sending
        counts = await ledger.counts(RUN)
        assert (counts[left], counts[IN_FLIGHT]) == (len(USERS), 0)
        assert updates[-1].states[left] == len(USERS)
        assert updates[-1].states[IN_FLIGHT] == 0

        # The run sent again: only what surely never left goes.
        async def accept(request: Request) -> Reply:
            return Reply(status=202, payload=ACK)

        mocked.routes.clear()
        mocked.post(SEND, callback=accept, repeat=True)
        FakeTime().install(client)
        again = await client.send_bulk(7, USERS, chunk_size=10, journal=ledger, lines=lines)
    # The first request refused, then the one that sent them; or only one.
    assert len(mocked.requests) == (2 if cut == "waiting to retry" else 1)
    if left == PLANNED:
        assert (again.counts[ACCEPTED], again.counts[AMBIGUOUS]) == (len(USERS), 0)
    else:
        assert again.counts[AMBIGUOUS] == len(USERS)
        assert all(chunk.resumed for chunk in again.ambiguous)


@pytest.mark.parametrize("cut", ["waiting to retry", "answered 429 during the grace"])
async def test_an_interrupt_starts_no_retry_even_within_the_grace(
    new_ledger: NewLedger, cut: str
) -> None:
    """A wait to retry a 429 shorter than the grace, under way or starting
    once interrupted: the interrupt ends it at once, no second request
    starts, the recipients stay planned."""
    mocked = ScriptedExchange()
    reached, interrupted = asyncio.Event(), asyncio.Event()

    async def answered_late(request: Request) -> Reply:
        reached.set()
        await interrupted.wait()
        return Reply(status=429, headers={"Retry-After": "1"}, payload={"detail": "slow"})

    async def short_wait(seconds: float) -> None:
        reached.set()
        await asyncio.sleep(0.3)

    if cut == "waiting to retry":
        mocked.post(SEND, status=429, headers={"Retry-After": "1"}, payload={"detail": "slow"})
    else:
        mocked.post(SEND, callback=answered_late)
    mocked.post(SEND, status=202, payload=ACK)  # what a retry would get
    async with (
        CampaignClient(
            "sk_tst_cancel_0123456789", campaign_url="http://campaign.test", exchange=mocked
        ) as client,
        new_ledger() as ledger,
    ):
        client.transport.sleep = short_wait
        sending = asyncio.create_task(
            client.send_bulk(7, USERS, chunk_size=10, journal=ledger, interrupt_grace=10)
        )
        await asyncio.wait_for(reached.wait(), 5)
        sending.cancel()
        await asyncio.sleep(0)  # the interrupt is under way
        interrupted.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(sending, 5)
        counts = await ledger.counts(RUN)
    assert len(mocked.requests) == 1
    assert (counts[PLANNED], counts[IN_FLIGHT], counts[ACCEPTED]) == (len(USERS), 0, 0)
