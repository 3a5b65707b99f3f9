"""What a cancellation tells of a request: whether one was under way. A
bulk send settles a request cancelled while none was under way as never
sent (its recipients left for the run's next send), not ambiguous."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, Final

_UNSENT: Final = "campaignkit: cancelled while no request was under way"


def note_unsent(cancelled: asyncio.CancelledError) -> None:
    """Mark ``cancelled`` as coming while no request was under way: before
    the first attempt, or while :meth:`Transport.call` waited to retry. A
    send is retried only after a failure without effect (a 429, a connection
    refused before any byte), so such a send surely never reached the
    service, and whoever settles it (:func:`cancelled_unsent`) may say so
    rather than call it ambiguous."""
    cancelled.add_note(_UNSENT)


def cancelled_unsent(cancelled: asyncio.CancelledError) -> bool:
    """Whether ``cancelled`` was marked by :func:`note_unsent`."""
    return _UNSENT in getattr(cancelled, "__notes__", ())


class RetryWaits:
    """The tasks of one bulk send waiting to retry a request, none under way
    (set in :data:`retry_waits` for the send's tasks). Once :meth:`stop` is
    called, each is cancelled, and so is any that comes to wait later: an
    interrupted send starts no new request, and its unsent requests are
    settled from :func:`note_unsent`."""

    def __init__(self) -> None:
        self.stopped = False
        self._waiting: set[asyncio.Task[Any]] = set()

    def stop(self) -> None:
        self.stopped = True
        for task in self._waiting:
            task.cancel()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        if self.stopped:
            raise asyncio.CancelledError
        task = asyncio.current_task()
        assert task is not None  # Transport.call runs in a task
        self._waiting.add(task)
        try:
            yield
        finally:
            self._waiting.discard(task)


retry_waits: ContextVar[RetryWaits | None] = ContextVar("campaignkit_retry_waits", default=None)
