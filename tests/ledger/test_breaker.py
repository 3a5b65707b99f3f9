"""The breaker, on every ledger: kept with the run's options, judged where
failures are recorded (tracking's statuses, claims settled rejected) over
the run's last ``over`` settled recipients, it pauses the run."""

from __future__ import annotations

import pytest
from helpers.ledgers import people

from campaignkit import Breaker
from campaignkit._guards import guard_options
from campaignkit.ledger import ACCEPTED, REJECTED, Ledger, StatusRow

pytestmark = pytest.mark.timeout(60)

RUN = "run-1"
FAILED = "FAILURE_BY_META_CHOSE_NOT_DELIVER"


async def accepted_run(ledger: Ledger, count: int, breaker: Breaker | None) -> list[str]:
    """A run of ``count`` accepted recipients (launch L) with ``breaker``; their phones."""
    await ledger.start_run(RUN, "1")
    await ledger.save_run_options(RUN, guard_options(breaker, None, False))
    recipients = people(count)
    await ledger.plan(RUN, "c1", recipients)
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id="L")
    return [r.phone for r in recipients]


def rows(phones: list[str], status: str, at: float) -> list[StatusRow]:
    return [
        StatusRow(phone, "L", f"conv-{phone}", status, at + i) for i, phone in enumerate(phones)
    ]


async def paused(ledger: Ledger, run: str = RUN) -> str | None:
    info = await ledger.run_info(run)
    assert info is not None
    return None if info.paused is None else f"{info.paused.reason}: {info.paused.detail}"


async def test_failed_statuses_past_the_share_pause_the_run(ledger: Ledger) -> None:
    phones = await accepted_run(ledger, 20, Breaker(max_failed=0.2, over=10))
    await ledger.record_statuses(RUN, rows(phones[:8], "DELIVERED", 1000.0))
    await ledger.record_statuses(RUN, rows(phones[8:10], FAILED, 2000.0))
    assert await paused(ledger) is None  # 2 of 10: at the share, not past it
    await ledger.record_statuses(RUN, rows(phones[10:11], FAILED, 3000.0))
    # The last 10 settled: 7 delivered, 3 failed.
    assert (
        await paused(ledger)
        == "breaker: 30% of 10 settled recipients failed (3): over the breaker's max_failed of 0.2"
    )


async def test_only_the_last_settled_recipients_count(ledger: Ledger) -> None:
    phones = await accepted_run(ledger, 40, Breaker(max_failed=0.2, over=10))
    await ledger.record_statuses(RUN, rows(phones[:2], FAILED, 1000.0))
    await ledger.record_statuses(RUN, rows(phones[2:30], "DELIVERED", 2000.0))
    await ledger.record_statuses(RUN, rows(phones[30:32], FAILED, 3000.0))
    assert await paused(ledger) is None  # 2 of the last 10: the first two are past
    # SUCCESS is not settled (it may still fail); a status seen again is not counted twice.
    await ledger.record_statuses(RUN, rows(phones[32:36], "SUCCESS", 4000.0))
    await ledger.record_statuses(RUN, rows(phones[30:32], FAILED, 5000.0))
    assert await paused(ledger) is None
    await ledger.record_statuses(RUN, rows(phones[32:33], FAILED, 6000.0))
    assert "30% of 10 settled recipients failed (3)" in (await paused(ledger) or "")


async def test_before_over_have_settled_the_share_is_of_over(ledger: Ledger) -> None:
    phones = await accepted_run(ledger, 20, Breaker(max_failed=0.2, over=10))
    await ledger.record_statuses(RUN, rows(phones[:2], FAILED, 1000.0))
    assert await paused(ledger) is None  # 2 failed: at most 20% of 10 whatever follows
    await ledger.record_statuses(RUN, rows(phones[2:3], FAILED, 2000.0))
    assert await paused(ledger) == (
        "breaker: 3 of 3 settled recipients failed (30% of the 10 the breaker judges): "
        "over the breaker's max_failed of 0.2"
    )


async def test_claims_settled_rejected_are_failures(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "1")
    await ledger.save_run_options(RUN, guard_options(Breaker(max_failed=0.5, over=8), None, False))
    for chunk, first in (("c1", 0), ("c2", 10)):
        await ledger.plan(RUN, chunk, people(4, first=first))
        claim = await ledger.claim(RUN, chunk)
        assert claim is not None
        await ledger.settle(RUN, claim.token, REJECTED, detail="BadRequestError: bad users")
        if chunk == "c1":
            assert await paused(ledger) is None  # 4 of 8: at the share
    assert (await paused(ledger) or "").startswith(
        "breaker: 100% of 8 settled recipients failed (8)"
    )


async def test_a_run_without_a_breaker_is_never_paused_by_failures(ledger: Ledger) -> None:
    phones = await accepted_run(ledger, 10, None)
    await ledger.record_statuses(RUN, rows(phones, FAILED, 1000.0))
    assert await paused(ledger) is None
