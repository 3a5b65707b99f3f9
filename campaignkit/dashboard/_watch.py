"""One launch watched by the dashboard: a tracker in a background task
feeding its stages, the timeline and the readers waiting for a change."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import tenacity

from .. import errors
from .._deprecated import renamed_attribute
from .._redaction import sdk_logger
from ..models import CampaignStatus
from ..status import CampaignState
from ..tracker import CampaignTracker
from ._html import LaunchSummary
from ._stages import LaunchStages, failed_phones, launch_stages
from ._timeline import Sample, Timeline

if TYPE_CHECKING:
    from ..client import CampaignClient

__all__ = ["Signal", "Watch"]

log = sdk_logger("campaignkit.dashboard")


class Signal:
    """A version number readers wait on: each event stream wakes on every
    change and, reading the version, never misses one."""

    def __init__(self) -> None:
        self.version = 0
        self._moved = asyncio.Event()

    def bump(self) -> None:
        self.version += 1
        self._moved.set()
        self._moved = asyncio.Event()

    async def wait(self, seen: int, timeout: float) -> None:
        """Return when the version is no longer ``seen``, or after ``timeout``."""
        if self.version != seen:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._moved.wait()


class Watch:
    """Tracks one launch until no deployment is in progress, then, while some
    are ``SUCCESS`` (they may still become ``DELIVERED``), re-reads it with a
    growing interval for up to ``linger`` seconds."""

    def __init__(
        self,
        client: CampaignClient,
        launch_request_id: str,
        *,
        on_change: Callable[[], None],
        poll_interval: float,
        max_interval: float,
        linger: float,
    ) -> None:
        self.launch_request_id = launch_request_id
        self.timeline = Timeline()
        self.signal = Signal()
        self.state: CampaignState | None = None
        self.stages = LaunchStages()
        self.error: str | None = None
        self.finished = False
        self.poll_id: int | None = None
        self.phones: tuple[tuple[str, tuple[str, ...]], ...] = ()
        self._phones_of: tuple[tuple[str, int], ...] | None = None
        self.dropped = False
        """No longer followed (the dashboard follows a bounded number)."""
        self._client = client
        self._on_change = on_change
        self._poll_interval = poll_interval
        self._max_interval = max_interval
        self._linger = linger
        self._tracker: CampaignTracker | None = None
        self._task: asyncio.Task[None] | None = None

    funnel = renamed_attribute("Watch", "funnel", "stages")

    @property
    def summary(self) -> LaunchSummary:
        return LaunchSummary(
            self.launch_request_id,
            self.state,
            self.stages,
            self.error,
            poll_id=self.poll_id,
            phones=self.phones,
        )

    @property
    def status(self) -> CampaignStatus | None:
        """The last status read (None before the first)."""
        return None if self._tracker is None else self._tracker.result

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"watch {self.launch_request_id}")

    async def close(self, *, dropped: bool = False) -> None:
        """Stop tracking; ``dropped``: for good, and the readers are told."""
        self.dropped = dropped
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if dropped:
            self.signal.bump()

    async def _run(self) -> None:
        rounds = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_result(bool),
            wait=tenacity.wait_exponential(self._poll_interval, max=self._max_interval),
            stop=tenacity.stop_after_delay(self._linger),
            retry_error_callback=lambda _: False,
        )
        try:
            await rounds(self._round)
        except errors.CampaignKitError as exc:
            self.error = str(exc)
        except Exception as exc:
            log.exception("watching %s failed", self.launch_request_id)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.finished = True
            self._changed()

    async def _round(self) -> bool:
        """Track until settled; True while some deployment may still move."""
        previous = self._tracker
        tracker = self._client.track(
            self.launch_request_id,
            until="settled",
            poll_interval=self._poll_interval,
            max_interval=self._max_interval,
            resume=None if previous is None else previous.checkpoint(),
            on_state=self._on_state,
        )
        self._tracker = tracker
        observed: datetime | None = None
        async with tracker:
            async for change in tracker:
                if change.observed_at != observed:  # one sample per poll
                    observed = change.observed_at
                    self._sample(observed)
        self._sample(datetime.now(UTC))
        return self.stages.sent > 0

    def _on_state(self, state: CampaignState) -> None:
        self._sample(datetime.now(UTC))

    def _sample(self, at: datetime) -> None:
        tracker = self._tracker
        assert tracker is not None
        self.state, self.stages = tracker.state, launch_stages(tracker.counts)
        if self.timeline.record(Sample(at, self.state, self.stages)):
            self._read_result(tracker)
            self._changed()

    def _read_result(self, tracker: CampaignTracker) -> None:
        """The poll and, when the failures moved, the phones behind them."""
        if self.poll_id is not None and self.stages.failures == self._phones_of:
            return
        result = tracker.result
        if result is None:
            return
        self.poll_id = result.poll_id
        if self.stages.failures != self._phones_of:
            self._phones_of = self.stages.failures
            self.phones = failed_phones((d.cellphone, d.status) for d in result.deployments)

    def _changed(self) -> None:
        self.signal.bump()
        self._on_change()
