"""When the next poll is due, from tenacity wait objects: back off
(exponential, jittered in its upper half) while nothing changes or polls
fail, return to ``poll_interval`` on a change, honour ``Retry-After``."""

from __future__ import annotations

import tenacity


class PollSchedule:
    """Waits between polls; pure but for the jitter."""

    def __init__(self, poll_interval: float, max_interval: float, retry_after_cap: float) -> None:
        self.poll_interval = poll_interval
        self.max_interval = max_interval
        self.retry_after_cap = retry_after_cap
        half, half_max = poll_interval / 2, max_interval / 2
        # c/2 + uniform(0, c/2) for the ceiling c = min(max, poll * 2**steps)
        self._backoff = tenacity.wait_exponential(
            multiplier=half, max=half_max
        ) + tenacity.wait_random_exponential(multiplier=half, max=half_max)
        self._steps = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})

    def after_poll(self, changed: bool, quiet: int) -> float:
        """The wait after a poll that read an answer; ``quiet``: polls in a
        row without a change."""
        return self.poll_interval if changed else self.backoff(quiet)

    def after_failure(self, retry_after: float | None, failures: int) -> float:
        """The wait after the ``failures``-th failed poll in a row; a
        ``Retry-After`` overrides it (even above ``max_interval``)."""
        if retry_after is not None:
            return min(float(retry_after), self.retry_after_cap)
        return self.backoff(failures)

    def backoff(self, steps: int) -> float:
        """Grows from ``poll_interval`` up to ``max_interval``, never below it."""
        self._steps.attempt_number = min(steps, 32) + 1
        return max(self.poll_interval, self._backoff(self._steps))
