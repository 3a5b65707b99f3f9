"""The tenacity strategies the retry loops add to tenacity's own: a
``Retry-After`` before any schedule (``RetryAfter``), the tracker's backoff
that starts over at each change (``PollBackoff``), and the stops on the
house's clock (``StopAt``, ``StopBefore``). Each is called with tenacity's
own retry state, as its loop calls it."""

from __future__ import annotations

import tenacity
from hypothesis import given
from hypothesis import strategies as st

from campaignkit import RateLimitError, ServerError
from campaignkit._backoff import RetryAfter
from campaignkit._io.transport import StopBefore
from campaignkit.tracker._schedule import PollBackoff, StopAt

seconds = st.floats(min_value=0.001, max_value=1000, allow_nan=False)


def state_after(attempt_number: int, outcome: BaseException | int) -> tenacity.RetryCallState:
    """tenacity's state after attempt ``attempt_number`` ended with ``outcome``
    (an exception, or a poll's count of changes)."""
    state = tenacity.RetryCallState(tenacity.AsyncRetrying(), None, (), {})
    state.attempt_number = attempt_number
    if isinstance(outcome, BaseException):
        state.set_exception((type(outcome), outcome, None))
    else:
        state.set_result(outcome)
    return state


@given(retry_after=st.floats(0, 10_000, allow_nan=False), cap=seconds, attempt=st.integers(1, 9))
def test_retry_after_comes_before_the_schedule_up_to_its_cap(
    retry_after: float, cap: float, attempt: int
) -> None:
    wait = RetryAfter(tenacity.wait_fixed(123), cap)
    failure = RateLimitError(429, "GET", "u", "", retry_after=retry_after)
    assert wait(state_after(attempt, failure)) == min(retry_after, cap)
    assert wait(state_after(attempt, ServerError(503, "GET", "u", ""))) == 123
    assert wait(state_after(attempt, 0)) == 123


@given(poll=seconds, extra=st.floats(0, 1000, allow_nan=False), quiet=st.integers(1, 500))
def test_poll_waits_stay_between_the_interval_and_the_ceiling(
    poll: float, extra: float, quiet: int
) -> None:
    backoff = PollBackoff(poll, poll + extra)
    ceiling = min(poll + extra, poll * 2.0 ** min(quiet, 32))
    wait = backoff(state_after(quiet, 0))
    assert max(poll, ceiling / 2) <= wait <= max(poll, ceiling)
    assert backoff(state_after(quiet + 1, 3)) == poll  # a poll that read changes


def test_poll_backoff_starts_over_after_a_change_and_counts_failures_as_quiet() -> None:
    backoff = PollBackoff(1.0, 1000.0)
    outcomes: list[BaseException | int] = [0, 0, ServerError(500, "GET", "u", ""), 2, 0, 0]
    waits = [backoff(state_after(n, outcome)) for n, outcome in enumerate(outcomes, 1)]
    ceilings = [2.0, 4.0, 8.0, None, 2.0, 4.0]
    for wait, ceiling in zip(waits, ceilings, strict=True):
        if ceiling is None:
            assert wait == 1.0
        else:
            assert ceiling / 2 <= wait <= ceiling


def test_stop_at_stops_once_the_clock_reaches_the_deadline() -> None:
    now = [9.0]
    stop = StopAt(lambda: now[0], 10.0)
    assert not stop(state_after(1, 0))
    now[0] = 10.0
    assert stop(state_after(1, 0))


def test_stop_before_stops_rather_than_wait_past_the_deadline() -> None:
    now = [4.0]
    stop = StopBefore(lambda: now[0], 10.0)
    state = state_after(1, ServerError(503, "GET", "u", ""))
    state.upcoming_sleep = 5.9
    assert not stop(state)
    state.upcoming_sleep = 6.0
    assert stop(state)
