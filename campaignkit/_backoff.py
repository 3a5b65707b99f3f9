"""The waits of the house's retry loops: what tenacity does not say itself
(a ``Retry-After`` before any schedule), and the reconnection waits of the
brokers' and the ledger's callers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import tenacity
from tenacity.wait import WaitBaseT


class RetryAfter(tenacity.wait.wait_base):
    """A tenacity wait: after a failure that carries a ``retry_after`` (a 429
    or 503 with ``Retry-After``), that many seconds, capped at ``cap`` (even
    above the schedule's own ceiling); otherwise ``schedule``'s wait. The
    service's word comes before any schedule, the default or a user's."""

    def __init__(self, schedule: WaitBaseT, cap: float) -> None:
        self.schedule = schedule
        self.cap = cap

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        if outcome is not None and outcome.failed:
            retry_after = getattr(outcome.exception(), "retry_after", None)
            if retry_after is not None:
                return min(float(retry_after), self.cap)
        return float(self.schedule(retry_state))


def reconnecting(
    lost: type[BaseException] | Callable[[BaseException], bool],
    stop: tenacity.stop.StopBaseT,
    say: Callable[[BaseException | None, float, int], object],
) -> tenacity.AsyncRetrying:
    """Tenacity's loop for a call made again while its connection is lost
    (it raises ``lost``, or an error ``lost(error)`` holds true of):
    :func:`reconnect_delay`'s waits until ``stop``, ``say(error, delay,
    attempt)`` before each wait, the last error raised.

    A task being cancelled is never kept waiting: on Python 3.11 a read's
    timeout can turn the cancellation into the very error retried here, and
    a task told to stop would go on retrying for ever.
    """

    def before_sleep(state: tenacity.RetryCallState) -> None:
        error = None if state.outcome is None else state.outcome.exception()
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError from error
        delay = 0.0 if state.next_action is None else state.next_action.sleep
        say(error, delay, state.attempt_number)

    return tenacity.AsyncRetrying(
        retry=(
            tenacity.retry_if_exception_type(lost)
            if isinstance(lost, type)
            else tenacity.retry_if_exception(lost)
        ),
        wait=tenacity.wait_random_exponential(multiplier=0.1, max=5.0),
        stop=stop,
        before_sleep=before_sleep,
        reraise=True,
    )


def reconnect_delay(attempt: int, *, first: float = 0.1, cap: float = 5.0) -> float:
    """Seconds to wait before reconnection ``attempt`` (1, 2, ...): "full
    jitter" exponential backoff, so that workers cut off together do not
    come back together."""
    return random.uniform(0, min(cap, first * 2 ** (attempt - 1)))
