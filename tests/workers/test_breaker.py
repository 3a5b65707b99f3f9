"""A breaker across workers, end to end (3 ``campaignkit worker`` processes,
real Redis and PostgreSQL, the sandbox failing a share of the numbers): the
producer follows the run while the workers send it (``wait(follow=True)``),
the breaker pauses it within ``over`` settled recipients of the moment its
threshold was crossed, nothing is sent after the pause but the claims
already taken, and the resumed run sends the rest exactly once."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

import pytest
from helpers.workers import worker_fleet

from campaignkit import Breaker, DeploymentStatus, User
from campaignkit.ledger import ACCEPTED, PLANNED, PostgresLedger, RecipientOutcome
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(120)

GOOD, MIXED = 100, 900
"""Numbers first delivered, then numbers half of which fail."""
BREAKER = Breaker(max_failed=0.2, over=50)
CHUNK = 10
WORKERS = 3


def people() -> list[User]:
    good = [User(cellphone=f"31{n:08d}", country_code="+57") for n in range(GOOD)]
    return good + [User(cellphone=f"32{n:08d}", country_code="+57") for n in range(MIXED)]


def crossing(outcomes: list[RecipientOutcome]) -> int:
    """How many recipients had settled (in the order their statuses were
    seen) when the failure share of the last ``over`` first passed the
    breaker's threshold."""
    failed = [o.status is not None and o.status.is_failure for o in outcomes]
    for i in range(len(failed)):
        window = failed[max(0, i + 1 - BREAKER.over) : i + 1]
        if sum(window) > BREAKER.max_failed * BREAKER.over:
            return i + 1
    raise AssertionError("the threshold was never crossed")


async def test_a_breaker_pauses_a_run_across_three_workers(
    sb: Sandbox, postgres_dsn: str, redis_url: str
) -> None:
    await sb.fail_prefix("+5732", rate=0.5, status=DeploymentStatus.FAILURE_BY_UNABLE_TO_CONTACT)
    # Each request answered 0.5 s after it was taken: the workers send about
    # six chunks a second, the follower learns the outcomes as they go.
    await sb.set_faults(
        {"kind": "latency", "seconds": 0.5, "route": "send_campaign", "when": "after"}
    )
    async with sb.client() as client:
        poll = (await client.list_polls())[0].id
    users = people()
    async with worker_fleet(sb, redis_url, postgres_dsn, "ck-breaker-", WORKERS) as bulk:
        run = await bulk.submit(poll, users, run="risky", chunk_size=CHUNK, breaker=BREAKER)
        report = await bulk.wait(run, poll_interval=0.1, timeout=60, follow=True)

        assert report.paused is not None
        assert report.paused.startswith("breaker: ")
        async with PostgresLedger(postgres_dsn) as ledger:
            info = await ledger.run_info(run)
            assert info is not None
            assert info.paused is not None
            paused_at = info.paused.paused_at
            counts = await ledger.counts(run)
            assert counts[PLANNED] > MIXED // 2  # most of the run held back
            # Nothing sent after the pause but the claims already taken then.
            sent = [r.phone async for r in ledger.records(run, (ACCEPTED,))]
            claimed = await ledger.held(run, sent)
            assert all(at is not None and at <= paused_at for _, at in claimed.values())
            # Paused within `over` settled recipients of the threshold's crossing.
            outcomes = sorted(
                (o for o in await ledger.outcomes(run) if o.status_at is not None),
                key=lambda o: o.status_at or datetime.min,
            )
            settled_then = sum(
                1 for o in outcomes if o.status_at and o.status_at.timestamp() <= paused_at
            )
            assert crossing(outcomes) <= settled_then <= crossing(outcomes) + BREAKER.over

            # Resumed: a submit of the same input hands the rest over, sent once.
            await sb.clear_faults()
            assert await ledger.resume_run(run) == counts[PLANNED]
        await bulk.submit(poll, users, run=run, chunk_size=CHUNK)
        last = await bulk.wait(run, poll_interval=0.1, timeout=60)
        assert last.paused is None
        assert last.counts["accepted"] == GOOD + MIXED
    phone_counts = Counter((await sb.snapshot())["companies"][0]["phone_counts"])
    assert len(phone_counts) == GOOD + MIXED
    assert set(phone_counts.values()) == {1}
