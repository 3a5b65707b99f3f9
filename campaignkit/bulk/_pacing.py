"""Pacing a bulk send: its progress callbacks and its request rate."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from .._io.transport import Sleep
from .._io.unsent import cancelled_unsent
from .._redaction import sdk_logger
from .._report import BulkReport
from ..ledger import ACCEPTED, AMBIGUOUS, DEFERRED, IN_FLIGHT, PLANNED, REJECTED, SUPPRESSED
from ..progress import Eta, ProgressUpdate, run_update
from ._planner import Planner

logger = sdk_logger("campaignkit.bulk")

PROGRESS_INTERVAL: Final = 0.1
"""Seconds between two ``on_progress`` calls (the last call always happens)."""

# The ledger state of each chunk outcome (its count in a ProgressUpdate).
OUTCOME_STATE: Final = {
    "accepted": ACCEPTED,
    "rejected": REJECTED,
    "ambiguous": AMBIGUOUS,
    "deferred": DEFERRED,
    "suppressed": SUPPRESSED,
}


class ProgressReporter:
    """Calls ``on_progress`` with a :class:`ProgressUpdate` (the run's inputs
    by ledger state, as a run read from its ledger shows them) at most every
    :data:`PROGRESS_INTERVAL` seconds.

    An async callback runs as a task; a failed or cancelled send cancels the
    ones still running (:meth:`cancel`) rather than leave them behind.
    """

    def __init__(self, on_progress: Callable[[ProgressUpdate], object] | None, planner: Planner):
        self._on_progress = on_progress
        self._planner = planner
        self._counts = dict.fromkeys((IN_FLIGHT, *OUTCOME_STATE.values()), 0)
        self._started = self._last = time.monotonic()
        self._eta = Eta()
        self._callbacks: set[asyncio.Future[Any]] = set()
        self._total: int | None = None

    def advance(
        self,
        increments: Mapping[str, int] | None = None,
        force: bool = False,
        finished: bool = False,
    ) -> None:
        """Count ``increments`` (by ledger state); call ``on_progress`` if it is time."""
        for name, value in (increments or {}).items():
            self._counts[name] += value
        if self._on_progress is None:
            return
        now = time.monotonic()
        if not force and now - self._last < PROGRESS_INTERVAL:
            return
        self._last = now
        progress = self._update(now, finished)
        try:
            result = self._on_progress(progress)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._callbacks.add(task)
                task.add_done_callback(self._callback_done)
        except Exception:
            # Stopping a send half-way would leave chunks in flight: log instead.
            logger.exception("on_progress raised; the bulk send goes on")

    def _update(self, now: float, finished: bool) -> ProgressUpdate:
        planner = self._planner
        counts = {**self._counts, "invalid": len(planner.invalid)}
        counts["duplicate"] = len(planner.duplicates)
        # Read and not sent (yet): planned, or still in the queue.
        total = planner.total if self._total is None else self._total
        counts = {PLANNED: total - sum(counts.values()), **counts}
        # Done (DONE) when every input read is settled; an interrupt may leave some.
        settled = finished and not counts[PLANNED] and not counts[IN_FLIGHT]
        update = run_update(counts, None, settled)
        rate, eta = self._eta.observe(now, update.done, update.total)
        return attrs.evolve(
            update, finished=finished, elapsed=now - self._started, rate=rate, eta=eta
        )

    def cancelled(self, users: int, cancelled: asyncio.CancelledError) -> None:
        """Count a request of ``users`` cancelled, as ``send_claim`` settled it:
        planned again if it never left, else ambiguous."""
        self.advance({IN_FLIGHT: -users, AMBIGUOUS: 0 if cancelled_unsent(cancelled) else users})

    async def finish(self, report: BulkReport | None = None) -> None:
        """The last call (with the counts of ``report``, the run's read from
        its ledger, when there is one), then wait for the async calls still
        running."""
        if report is not None:
            counts = report.counts
            self._counts = {IN_FLIGHT: 0, **{s: counts[o] for o, s in OUTCOME_STATE.items()}}
            self._total = report.total
        self.advance(force=True, finished=True)
        if self._callbacks:
            await asyncio.gather(*self._callbacks, return_exceptions=True)

    async def interrupted(self) -> None:
        """The last call of an interrupted send (where the run stands): the
        calls still running get a second to end, then are cancelled (the
        interrupt must go on)."""
        self.advance(force=True, finished=True)
        if self._callbacks:
            await asyncio.wait(set(self._callbacks), timeout=1.0)
        await self.cancel()

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
