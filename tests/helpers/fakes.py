"""Time that passes at once: the client's ``sleep=`` and the tracker's ``clock=``."""

from __future__ import annotations

import asyncio


class FakeTime:
    """A clock and a sleep that advances it (and yields to the loop); every
    wait is recorded in ``sleeps``."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)
