"""Pacing a bulk send: its progress callbacks and its request rate."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from .._io.transport import Sleep
from .._redaction import sdk_logger
from .._report import BulkProgress
from ._planner import Planner

logger = sdk_logger("campaignkit.bulk")

PROGRESS_INTERVAL: Final = 0.1
"""Seconds between two ``on_progress`` calls (the last call always happens)."""

# The BulkProgress count of each chunk outcome (users of rejected chunks "failed").
PROGRESS_FIELD: Final = {
    "accepted": "accepted",
    "rejected": "failed",
    "ambiguous": "ambiguous",
    "deferred": "deferred",
}


class ProgressReporter:
    """Calls ``on_progress`` at most every :data:`PROGRESS_INTERVAL` seconds.

    An async callback runs as a task; a failed or cancelled send cancels the
    ones still running (:meth:`cancel`) rather than leave them behind.
    """

    def __init__(self, on_progress: Callable[[BulkProgress], object] | None, planner: Planner):
        self._on_progress = on_progress
        self._planner = planner
        self._counts = dict.fromkeys(("sent", "suppressed", *PROGRESS_FIELD.values()), 0)
        self._last = 0.0
        self._callbacks: set[asyncio.Future[Any]] = set()

    def advance(self, increments: Mapping[str, int] | None = None, force: bool = False) -> None:
        for name, value in (increments or {}).items():
            self._counts[name] += value
        if self._on_progress is None:
            return
        now = time.monotonic()
        if not force and now - self._last < PROGRESS_INTERVAL:
            return
        self._last = now
        planner = self._planner
        progress = BulkProgress(
            validated=planner.total,
            invalid=len(planner.invalid),
            duplicates=len(planner.duplicates),
            **self._counts,
        )
        try:
            result = self._on_progress(progress)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._callbacks.add(task)
                task.add_done_callback(self._callback_done)
        except Exception:
            # Stopping a send half-way would leave chunks in flight: log instead.
            logger.exception("on_progress raised; the bulk send goes on")

    async def finish(self) -> None:
        """The last call, then wait for the async calls still running."""
        self.advance(force=True)
        if self._callbacks:
            await asyncio.gather(*self._callbacks, return_exceptions=True)

    async def cancel(self) -> None:
        """The send has failed: leave no on_progress call running after it."""
        callbacks = set(self._callbacks)
        for task in callbacks:
            task.cancel()
        await asyncio.gather(*callbacks, return_exceptions=True)

    def _callback_done(self, task: asyncio.Future[Any]) -> None:
        self._callbacks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("on_progress raised; the bulk send goes on", exc_info=task.exception())


class RateLimiter:
    """Spaces request starts at least ``1 / rate`` seconds apart, on the
    client's ``clock`` and ``sleep`` (which tests inject)."""

    def __init__(self, rate: float, sleep: Sleep, clock: Callable[[], float]) -> None:
        self._interval = 1.0 / rate
        self._next = 0.0
        self._sleep = sleep
        self._clock = clock

    async def wait(self) -> None:
        now = self._clock()
        slot = max(now, self._next)
        self._next = slot + self._interval
        if slot > now:
            await self._sleep(slot - now)
