"""The poll schedule (campaignkit.tracker._schedule): waits grow while nothing
changes, come back after a change, follow Retry-After on transient failures;
tenacity wait and stop strategies of the user's own in their place. Time is
fake: every wait is recorded by ``fake_time``."""

from __future__ import annotations

import pytest
import tenacity
from helpers.exchange import ScriptedExchange, dropped_after_sending
from helpers.fakes import FakeTime
from helpers.tracking import (
    ACK,
    URL,
    answer,
    collect,
    dep,
    script,
    triples,
)

from campaignkit import (
    CampaignClient,
    CampaignState,
    TimeoutError,
    ValidationError,
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


async def test_the_backoff_starts_over_at_poll_interval_after_a_change(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    quiet = answer("CLAIMED", dep(1, "RECEIVED"))
    script(mocked, quiet, quiet, quiet, answer("CLAIMED", dep(1, "SUCCESS")), quiet, quiet)
    mocked.get(URL, payload=answer("DONE", dep(1, "DELIVERED")))
    await collect(scripted_client.track(ACK, poll_interval=1.0, max_interval=100.0))
    # after: a change, quiet, quiet, a change, quiet (it reads as one), quiet
    ceilings = [None, 2.0, 4.0, None, 2.0, 4.0]
    for wait, ceiling in zip(fake_time.sleeps, ceilings, strict=True):
        if ceiling is None:
            assert wait == 1.0
        else:
            assert ceiling / 2 <= wait <= ceiling


async def test_a_tenacity_wait_of_the_users_own_replaces_the_schedule(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    results: list[object] = []

    def wait(state: tenacity.RetryCallState) -> float:
        assert state.outcome is not None
        results.append(state.outcome.exception() or state.outcome.result())
        return 2.5 * state.attempt_number

    script(
        mocked,
        answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "RECEIVED")),
        answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "RECEIVED")),
        (429, '{"detail": "slow down"}', {"Retry-After": "7"}),
        answer("DONE", dep(1, "DELIVERED"), dep(2, "RECEIVED")),
    )
    await collect(scripted_client.track(ACK, wait=wait))
    # Each poll's result is the number of changes it read; a Retry-After
    # still comes first (in place of the user's wait).
    assert results == [2, 0]
    assert fake_time.sleeps == [2.5, 5.0, 7.0]
    fake_time.sleeps.clear()
    script(mocked, answer("PENDING"), answer("PENDING"), answer("DONE"))
    await collect(scripted_client.track(ACK, wait=tenacity.wait_fixed(3)))
    assert fake_time.sleeps == [3.0, 3.0]


async def test_a_tenacity_stop_ends_tracking_as_the_timeout_does(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(mocked, answer("CLAIMED", dep(1, "RECEIVED")))
    mocked.get(URL, payload=answer("CLAIMED", dep(1, "RECEIVED")), repeat=True)
    tracker = scripted_client.track(ACK, stop=tenacity.stop_after_attempt(4))
    with pytest.raises(TimeoutError, match="stop strategy") as info:
        await collect(tracker)
    assert tracker.stats.polls == 4
    assert tracker.finished
    last = info.value.last_status
    assert last is not None
    assert last.status is CampaignState.CLAIMED
    assert info.value.__cause__ is None


async def test_a_stop_while_failing_is_caused_by_the_last_failure(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(mocked, answer("PENDING"))
    mocked.get(URL, status=503, body="{}", repeat=True)
    tracker = scripted_client.track(ACK, stop=tenacity.stop_after_attempt(3))
    with pytest.raises(TimeoutError) as info:
        await collect(tracker)
    assert type(info.value.__cause__).__name__ == "ServerError"
    assert tracker.stats.polls == 3
    assert tracker.stats.retries == 1  # the third poll's failure was not retried


async def test_track_many_takes_the_same_strategies(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    mocked.get(URL, payload=answer("PENDING"), repeat=True)
    group = scripted_client.track_many(
        [ACK], wait=tenacity.wait_fixed(4), stop=tenacity.stop_after_attempt(2)
    )
    with pytest.raises(TimeoutError):
        await collect(group)
    assert fake_time.sleeps == [4.0]


async def test_strategy_mistakes_are_validation_errors_naming_the_option(
    scripted_client: CampaignClient,
) -> None:
    for options, field in (
        ({"wait": 3}, "wait"),
        ({"stop": "never"}, "stop"),
        ({"stop": tenacity.stop_after_attempt(3), "timeout": 10}, "stop"),
    ):
        with pytest.raises(ValidationError) as info:
            scripted_client.track(ACK, **options)
        assert [path for path, _ in info.value.problems] == [field]
