"""The waits of the house's retry loops: what tenacity does not say itself
(a ``Retry-After`` before any schedule), and the reconnection waits of the
brokers' and the ledger's callers."""

from __future__ import annotations

import random

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


def reconnect_delay(attempt: int, *, first: float = 0.1, cap: float = 5.0) -> float:
    """Seconds to wait before reconnection ``attempt`` (1, 2, ...): "full
    jitter" exponential backoff, so that workers cut off together do not
    come back together."""
    return random.uniform(0, min(cap, first * 2 ** (attempt - 1)))
