"""``TrackerGroup``: one merged stream of the changes of many launches."""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import Any, Self, TypeVar

from .._io.closing import AsyncClosing
from .._wire import sansio as wire
from .._wire.decode import Decode
from .._wire.sansio import Request
from ..config import ClientConfig
from ..errors import ValidationError
from ..models import CampaignAck
from ..progress import ProgressUpdate, campaign_update
from ..status import DeploymentStatus
from . import _checkpoint
from ._diff import DeploymentChange
from ._options import Clock, Sleep, StatusSource, TrackOptions
from ._pacer import Pacer, least_state
from ._tracker import CampaignTracker

T = TypeVar("T")


class _Bounded:
    """A :class:`StatusSource` with at most as many polls in flight as the
    semaphore allows, shared by the group's trackers."""

    def __init__(self, source: StatusSource, semaphore: asyncio.Semaphore) -> None:
        self._source = source
        self._semaphore = semaphore

    @property
    def config(self) -> ClientConfig:
        return self._source.config

    @property
    def clock(self) -> Clock:
        return self._source.clock

    @property
    def sleep(self) -> Sleep:
        return self._source.sleep

    async def attempt(self, request: Request, decode: Decode[T], timeout: float | None) -> T:
        async with self._semaphore:
            return await self._source.attempt(request, decode, timeout)


class TrackerGroup(AsyncClosing):
    """One merged stream of the changes of many launches (see
    :meth:`CampaignClient.track_many`).

    Each :class:`DeploymentChange` carries its ``launch_request_id``. At most
    ``concurrency`` status requests are in flight at once, all on the
    client's connection pool. Polls that are due together run together;
    nothing runs between two changes, so breaking out, ``aclose()`` or
    cancelling leaves no task behind. The first error of any launch (after
    its own retries) ends the stream.
    """

    keep_changes = False
    """True once the changes are iterated (see :meth:`updates`)."""

    def __init__(
        self,
        source: StatusSource,
        targets: Iterable[CampaignAck | str],
        options: TrackOptions,
        *,
        concurrency: int = 8,
        resume: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
            raise ValidationError([("concurrency", "must be an integer >= 1")])
        checkpoints = _checkpoint.group_checkpoints(resume)
        bounded = _Bounded(source, asyncio.Semaphore(concurrency))
        self.trackers: dict[str, CampaignTracker] = {}
        campaign_url = source.config.host("campaign_url")
        for target in targets:
            launch = wire.resolve_status_url(campaign_url, target)[1]
            if launch not in self.trackers:
                self.trackers[launch] = CampaignTracker(
                    bounded, target, options, resume=checkpoints.get(launch)
                )
        self._clock = source.clock
        self._buffer: deque[tuple[str, DeploymentChange]] = deque()
        self._busy = False
        self._active: list[CampaignTracker] = []  # prepared, not finished
        self._pacer = Pacer(self._prepare, self._due_at, self._poll_due, self._clock, source.sleep)

    def __repr__(self) -> str:
        progress = self.progress.summary()
        return f"<TrackerGroup of {len(self.trackers)} launches, progress={progress!r}>"

    @property
    def counts(self) -> Counter[DeploymentStatus | None]:
        """Deployments by current status over every launch."""
        total: Counter[DeploymentStatus | None] = Counter()
        for tracker in self.trackers.values():
            total.update(tracker.held_counts())
        return total

    @property
    def progress(self) -> ProgressUpdate:
        """The progress now over every launch: :meth:`snapshot`."""
        return self.snapshot()

    def checkpoint(self) -> dict[str, Any]:
        """Every tracker's checkpoint; pass it as ``resume=`` to ``track_many``.
        Changes read but not yet yielded are yielded again after a resume."""
        pending: dict[str, list[tuple[str, DeploymentChange]]] = {}
        for item in self._buffer:
            pending.setdefault(item[1].launch_request_id, []).append(item)
        checkpoints = []
        for launch, tracker in self.trackers.items():
            cp = tracker.checkpoint()
            _checkpoint.unyield(cp["statuses"], pending.get(launch, ()))
            checkpoints.append(cp)
        return _checkpoint.group_checkpoint(checkpoints)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> DeploymentChange:
        if self._busy:
            raise RuntimeError("this TrackerGroup is already being iterated")
        self._busy = self.keep_changes = True
        try:
            while not self._buffer:
                if not await self._pacer.advance(self):
                    raise StopAsyncIteration
            return self._buffer.popleft()[1]
        finally:
            self._busy = False

    def updates(self, every: float = 2.0) -> AsyncGenerator[ProgressUpdate]:
        """Throttled snapshots of every launch's progress, as
        :meth:`CampaignTracker.updates` makes them of one."""
        return self._pacer.updates(self.snapshot, every)

    def snapshot(self) -> ProgressUpdate:
        """The progress now over every launch, untimed (the least advanced
        launch's state)."""
        trackers = self.trackers.values()
        return campaign_update(
            self.counts,
            least_state(tracker.state for tracker in trackers),
            all(tracker.finished for tracker in trackers),
        )

    # -- the Pacer's steps: prepare every tracker, poll those due together

    async def _prepare(self) -> bool:
        self._active = [
            tracker for tracker in self.trackers.values() if await tracker.prepare_poll()
        ]
        return bool(self._active)

    def _due_at(self) -> float:
        return min(tracker.next_poll_at for tracker in self._active)

    async def _poll_due(self) -> None:
        now = self._clock()
        due = [tracker for tracker in self._active if tracker.next_poll_at <= now]
        if len(due) == 1:
            await due[0].poll()
        else:
            failures: list[BaseException] = []

            async def poll(tracker: CampaignTracker) -> None:
                try:
                    await tracker.poll()
                except Exception as exc:
                    failures.append(exc)

            # A TaskGroup waits for (or cancels and waits for) every poll.
            async with asyncio.TaskGroup() as group:
                for tracker in due:
                    group.create_task(poll(tracker))
            if failures:
                raise failures[0]
        if not self.keep_changes:  # see updates()
            self._buffer.clear()
        for tracker in due:
            self._buffer.extend(tracker.take_changes())

    async def aclose(self) -> None:
        """Stop every tracker; idempotent."""
        self._buffer.clear()
        for tracker in self.trackers.values():
            await tracker.aclose()
