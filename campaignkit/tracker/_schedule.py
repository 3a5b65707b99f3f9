"""When the next poll is due: back off (exponential, jittered in its upper
half) while nothing changes or polls fail, return to ``poll_interval`` on a
change, honour ``Retry-After``."""

from __future__ import annotations

import random

import attrs


@attrs.frozen
class PollSchedule:
    """Waits between polls; pure but for the jitter."""

    poll_interval: float
    max_interval: float
    retry_after_cap: float

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
        """``c/2 + uniform(0, c/2)`` for the ceiling ``c = min(max_interval,
        poll_interval * 2**steps)``, never below ``poll_interval``."""
        ceiling = min(self.max_interval, self.poll_interval * 2.0 ** min(steps, 32))
        return max(self.poll_interval, ceiling / 2 + random.uniform(0, ceiling / 2))
