"""The two pure schedules the retry loops read: the transport's full-jitter
backoff (``retry_wait``) and the tracker's poll waits (``PollSchedule``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from campaignkit import RateLimitError, RetryPolicy, ServerError
from campaignkit._io.transport import retry_wait
from campaignkit.tracker._schedule import PollSchedule

seconds = st.floats(min_value=0.001, max_value=1000, allow_nan=False)


@given(initial=seconds, cap=seconds, retry=st.integers(1, 200))
def test_backoff_is_full_jitter_under_a_doubling_ceiling(
    initial: float, cap: float, retry: int
) -> None:
    policy = RetryPolicy(backoff_initial=initial, backoff_max=cap)
    wait = retry_wait(policy, retry, ServerError(503, "GET", "u", ""))
    assert 0 <= wait <= min(cap, initial * 2.0 ** (retry - 1))


@given(retry_after=st.floats(0, 10_000, allow_nan=False), cap=seconds, retry=st.integers(1, 9))
def test_retry_after_overrides_the_backoff_up_to_its_cap(
    retry_after: float, cap: float, retry: int
) -> None:
    failure = RateLimitError(429, "GET", "u", "", retry_after=retry_after)
    assert retry_wait(RetryPolicy(retry_after_cap=cap), retry, failure) == min(retry_after, cap)


@given(poll=seconds, extra=st.floats(0, 1000, allow_nan=False), steps=st.integers(0, 500))
def test_poll_waits_stay_between_the_interval_and_the_ceiling(
    poll: float, extra: float, steps: int
) -> None:
    schedule = PollSchedule(poll, poll + extra, 60.0)
    ceiling = min(poll + extra, poll * 2.0 ** min(steps, 32))
    wait = schedule.backoff(steps)
    assert max(poll, ceiling / 2) <= wait <= max(poll, ceiling)
    assert schedule.after_poll(True, steps) == poll
    assert schedule.after_failure(1e9, steps) == 60.0
