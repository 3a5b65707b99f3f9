"""Settling an outcome the service gave is tried again while the ledger stays
lost for longer than its own ``reconnect_timeout``, until the claim expires;
a cancellation meanwhile waits for it. On a memory ledger whose settles fail
as a lost server's do for a while (the real PostgreSQL outage is in
tests/workers/test_settle_outage.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from helpers.ledgers import people

from campaignkit.bulk import ClaimOutcome
from campaignkit.bulk._sender import settle_claim
from campaignkit.ledger import ACCEPTED, AMBIGUOUS, Claim, MemoryLedger
from campaignkit.ledger._schema import LedgerUnavailable
from campaignkit.models import CampaignAck

pytestmark = pytest.mark.timeout(30)

RUN = "run-1"
ACCEPTED_OUTCOME = ClaimOutcome("accepted", ack=CampaignAck("queued", "7", "b1", "lr-1", "/s"))


class LostLedger(MemoryLedger):
    """Its settles fail as a lost server's (after its own retries) until ``back``."""

    back = float("inf")
    attempts = 0

    async def settle(self, *args: Any, **kwargs: Any) -> None:
        self.attempts += 1
        if time.monotonic() < self.back:
            raise LedgerUnavailable("the ledger failed: ConnectionRefusedError: refused")
        await super().settle(*args, **kwargs)


async def claimed(ledger: MemoryLedger) -> Claim:
    await ledger.plan(RUN, "c1", people(3))
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    return claim


async def states(ledger: MemoryLedger) -> set[str]:
    return {r.state async for r in ledger.records(RUN)}


async def test_an_outage_longer_than_the_ledger_waits_still_settles_the_outcome(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with LostLedger(claim_ttl=30) as ledger:
        claim = await claimed(ledger)
        ledger.back = time.monotonic() + 0.5
        await asyncio.wait_for(settle_claim(ledger, RUN, claim, ACCEPTED_OUTCOME), 10)
        assert await states(ledger) == {ACCEPTED}
    assert ledger.attempts >= 2
    warnings = [r.getMessage() for r in caplog.records if "settling claim" in r.getMessage()]
    assert len(warnings) == ledger.attempts - 1
    assert f"settling claim {claim.token} of run {RUN} (accepted) again in" in warnings[0]


async def test_a_settle_gives_up_once_the_claim_expired(caplog: pytest.LogCaptureFixture) -> None:
    async with LostLedger(claim_ttl=0.5) as ledger:
        claim = await claimed(ledger)
        with pytest.raises(LedgerUnavailable):
            await asyncio.wait_for(settle_claim(ledger, RUN, claim, ACCEPTED_OUTCOME), 10)
        assert time.time() >= claim.expires
        assert "expired before it was settled" in caplog.text
        # Reported ambiguous, as an expired claim is.
        assert await ledger.expire(RUN) == 3
        assert await states(ledger) == {AMBIGUOUS}


async def test_a_cancelled_settle_records_the_outcome_before_the_cancellation_goes_on() -> None:
    async with LostLedger(claim_ttl=30) as ledger:
        claim = await claimed(ledger)
        ledger.back = time.monotonic() + 0.5
        settling = asyncio.create_task(settle_claim(ledger, RUN, claim, ACCEPTED_OUTCOME))
        await asyncio.sleep(0.1)
        settling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(settling, 10)
        assert time.monotonic() >= ledger.back
        assert await states(ledger) == {ACCEPTED}


async def test_cancelled_twice_it_stops_waiting_and_the_settle_goes_on() -> None:
    async with LostLedger(claim_ttl=30) as ledger:
        claim = await claimed(ledger)
        ledger.back = time.monotonic() + 0.5
        settling = asyncio.create_task(settle_claim(ledger, RUN, claim, ACCEPTED_OUTCOME))
        for _ in range(2):
            await asyncio.sleep(0.05)
            settling.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(settling, 10)
        assert time.monotonic() < ledger.back
        for _ in range(100):
            if await states(ledger) == {ACCEPTED}:
                break
            await asyncio.sleep(0.05)
        assert await states(ledger) == {ACCEPTED}
