"""One poll at a time for all the consumers of a tracker or a group (the
change iterator and any number of ``updates()``): the :class:`Pacer`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable

from ..progress import ProgressUpdate, check_every, throttled
from ..status import CampaignState
from ._options import Clock, Sleep


class Pacer:
    """Polls when they are due, whoever asks: each consumer sleeps until the
    next poll is due, and the first one awake makes it while the others wait
    for it and see its result. So two consumers never poll twice, and neither
    misses a poll the other made. No task of its own: it runs in the
    consumers' awaits, and a cancelled poll is made again by the next one.

    ``prepare``: False once tracking is over; ``due_at``: when the next poll
    is due, once prepared; ``poll_due``: make the polls that are due.
    """

    def __init__(
        self,
        prepare: Callable[[], Awaitable[bool]],
        due_at: Callable[[], float],
        poll_due: Callable[[], Awaitable[None]],
        clock: Clock,
        sleep: Sleep,
    ) -> None:
        self._prepare = prepare
        self._due_at = due_at
        self._poll_due = poll_due
        self.clock = clock
        self.sleep = sleep
        self._lock = asyncio.Lock()
        self._error: Exception | None = None
        self._told: set[object] = set()  # the consumers the error was raised to
        self.polls = 0

    async def advance(self, consumer: object) -> bool:
        """Return after the next poll, made here or by another consumer; False
        (at once) when tracking is over. The error that ended tracking is
        raised once to each ``consumer`` (an iterator)."""
        seen = self.polls
        while True:
            async with self._lock:
                if self._error is not None:
                    if consumer in self._told:
                        return False
                    self._told.add(consumer)
                    raise self._error
                if self.polls != seen:
                    return True
                try:
                    if not await self._prepare():
                        return False
                    wait = self._due_at() - self.clock()
                    if wait <= 0:
                        await self._poll_due()
                        self.polls += 1
                        return True
                except Exception as exc:
                    self._error = exc
                    self._told.add(consumer)
                    raise
            await self.sleep(wait)

    def updates(
        self, snapshot: Callable[[], ProgressUpdate], every: object
    ) -> AsyncGenerator[ProgressUpdate]:
        """The ``snapshot`` after each poll, throttled to at most one per
        ``every`` seconds (see ``CampaignTracker.updates``)."""
        return throttled(_readings(self, snapshot), check_every(every), self.clock, self.sleep)


async def _readings(
    pacer: Pacer, snapshot: Callable[[], ProgressUpdate]
) -> AsyncGenerator[ProgressUpdate]:
    """A snapshot after each poll, up to the finished one."""
    consumer = object()
    while True:
        await pacer.advance(consumer)
        update = snapshot()
        yield update
        if update.finished:
            return


_STATE_ORDER = list(CampaignState)


def least_state(states: Iterable[CampaignState | None]) -> CampaignState | None:
    """The least advanced of ``states`` (None if one is None, or none is given)."""
    found = list(states)
    if not found or None in found:
        return None
    return min((s for s in found if s is not None), key=_STATE_ORDER.index)
