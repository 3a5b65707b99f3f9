"""The tracker's tenacity strategies. Each poll is one attempt of the
tracker's ``AsyncRetrying`` loop, and its result is the number of changes
it read: so a wait can tell a poll that moved something from a quiet one.

:class:`PollBackoff` is the default wait (the one a ``wait=`` replaces);
:class:`StopAt` the stop at ``timeout`` (the one a ``stop=`` replaces), on
the tracker's own clock, which tests replace with fake time."""

from __future__ import annotations

import random

import tenacity

from ._options import Clock


class PollBackoff(tenacity.wait.wait_base):
    """``poll_interval`` after a poll that read a change; while nothing
    changes (or polls fail), a backoff from the last change: ``c/2 +
    uniform(0, c/2)`` for the ceiling ``c = min(max_interval, poll_interval
    * 2**n)`` after the n-th poll since, never below ``poll_interval``.

    Unlike tenacity's own waits, which grow with every attempt, it starts
    over at each change: it remembers the last one, so it serves one loop.
    """

    def __init__(self, poll_interval: float, max_interval: float) -> None:
        self.poll_interval = poll_interval
        self.max_interval = max(max_interval, poll_interval)
        self._changed_at = 0  # the attempt number of the last poll that read a change

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        assert outcome is not None  # tenacity waits after an attempt
        if not outcome.failed and outcome.result():
            self._changed_at = retry_state.attempt_number
            return self.poll_interval
        quiet = retry_state.attempt_number - self._changed_at
        ceiling = min(self.max_interval, self.poll_interval * 2.0 ** min(quiet, 32))
        return max(self.poll_interval, ceiling / 2 + random.uniform(0, ceiling / 2))


class StopAt(tenacity.stop.stop_base):
    """Stop once ``clock()`` reaches ``deadline`` (tenacity's
    ``stop_after_delay`` reads the process's monotonic clock instead)."""

    def __init__(self, clock: Clock, deadline: float) -> None:
        self.clock = clock
        self.deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self.clock() >= self.deadline
