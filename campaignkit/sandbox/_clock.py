"""The sandbox clock: wall time at start, running ``speed`` times faster."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Clock"]


class Clock:
    """Sandbox time in UNIX seconds.

    Every timed behaviour of the sandbox (claiming, status steps, ETAs,
    replies) reads this clock, so a test at ``speed=50`` sees in 0.1 s what
    takes 5 s at real speed. The admin route can change the speed, set the
    time or jump ahead; listeners are told so sleeping schedulers re-plan.
    """

    def __init__(self, speed: float = 1.0, start: float | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self._speed = speed
        self._anchor_real = time.monotonic()
        self._anchor = time.time() if start is None else float(start)
        self._listeners: list[Callable[[], None]] = []

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        return self._anchor + (time.monotonic() - self._anchor_real) * self._speed

    def real_delay(self, sandbox_seconds: float) -> float:
        """Real seconds until ``sandbox_seconds`` of sandbox time have passed."""
        return max(0.0, sandbox_seconds / self._speed)

    def set(
        self, *, now: float | None = None, speed: float | None = None, advance: float = 0.0
    ) -> None:
        """Re-anchor the clock: new time and/or speed, or a jump forward."""
        if speed is not None and speed <= 0:
            raise ValueError("speed must be > 0")
        current = self.now() if now is None else float(now)
        self._anchor = current + advance
        self._anchor_real = time.monotonic()
        if speed is not None:
            self._speed = float(speed)
        for listener in self._listeners:
            listener()

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def to_dict(self) -> dict[str, float]:
        return {"now": self.now(), "speed": self._speed}
