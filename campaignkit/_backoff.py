"""The waits between reconnection attempts, for the brokers' and the ledger's
callers alike."""

from __future__ import annotations

import random


def reconnect_delay(attempt: int, *, first: float = 0.1, cap: float = 5.0) -> float:
    """Seconds to wait before reconnection ``attempt`` (1, 2, ...): "full
    jitter" exponential backoff, so that workers cut off together do not
    come back together."""
    return random.uniform(0, min(cap, first * 2 ** (attempt - 1)))
