"""The poll schedule (campaignkit.tracker._schedule): waits grow while nothing
changes, come back after a change, follow Retry-After on transient failures.
Time is fake: every wait is recorded by ``fake_time``."""

from __future__ import annotations

from helpers.exchange import ScriptedExchange, dropped_after_sending
from helpers.fakes import FakeTime
from helpers.tracking import (
    ACK,
    answer,
    collect,
    dep,
    script,
    triples,
)

from campaignkit import (
    CampaignClient,
)


async def test_interval_grows_to_max_while_nothing_changes(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(mocked, *[answer("PENDING")] * 8, answer("DONE", dep(1, "DELIVERED")))
    changes = await collect(scripted_client.track(ACK, poll_interval=0.5, max_interval=10.0))
    assert triples(changes) == [("c1", None, "DELIVERED")]
    ceilings = [min(10.0, 0.5 * 2**q) for q in range(1, 9)]
    for wait, ceiling in zip(fake_time.sleeps, ceilings, strict=True):
        assert max(0.5, ceiling / 2) <= wait <= ceiling
    assert fake_time.sleeps[-1] >= 5.0


async def test_transient_failures_are_retried_counted_and_retry_after_overrides_the_wait(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(
        mocked,
        answer("CLAIMED", dep(1, "RECEIVED")),
        (429, '{"detail": "slow down"}', {"Retry-After": "7"}),
        (503, '{"detail": "busy"}', {"Retry-After": "11"}),
        (500, '{"detail": "boom"}', {}),
        dropped_after_sending(),
        (502, "<html><body>Bad Gateway</body></html>", {"Content-Type": "text/html"}),
        (200, "<html>proxy</html>", {"Content-Type": "text/html"}),
        answer("DONE", dep(1, "DELIVERED")),
    )
    tracker = scripted_client.track(ACK, max_interval=4.0)
    changes = await collect(tracker)
    assert triples(changes) == [("c1", None, "RECEIVED"), ("c1", "RECEIVED", "DELIVERED")]
    assert tracker.stats.retries == 6
    assert tracker.stats.polls == 8
    first, after_429, after_503, *backoffs = fake_time.sleeps
    assert first == 1.0
    assert after_429 == 7.0  # Retry-After overrides the backoff...
    assert after_503 == 11.0  # ...even above max_interval
    assert all(1.0 <= wait <= 4.0 for wait in backoffs)
