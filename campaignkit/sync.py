"""A blocking :class:`CampaignClient` for scripts, cron jobs and notebooks.

Same constructor, same calls, same errors as :class:`campaignkit.CampaignClient`,
without ``await``::

    with CampaignClient() as client:
        ack = client.send_campaign(poll_id, users)
        for change in client.track(ack):
            print(change.current)

It runs the async client on an event loop of its own, in a thread it starts,
so it works where a loop is already running (Jupyter) and where none is.
Closing it (leaving the ``with`` block, or :meth:`~CampaignClient.close`)
closes the connections and ends the thread. Calls are made one at a time per
thread that makes them; one client may be shared by threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, cast

from . import client as _async
from ._io.transport import RawAnswer, Transport, recording_answers
from .config import ClientConfig
from .errors import CampaignKitError
from .models import CampaignStatus
from .progress import ProgressUpdate
from .status import CampaignState, DeploymentStatus
from .tracker import CampaignTracker, DeploymentChange, TrackerGroup

__all__ = ["CampaignClient", "Group", "Tracker"]

P = ParamSpec("P")
T = TypeVar("T")
A = TypeVar("A")
W = TypeVar("W")
F = TypeVar("F", CampaignTracker, TrackerGroup)
_DONE = object()


def _named(wrapper: Callable[P, T], call: Callable[..., object]) -> Callable[P, T]:
    """``wrapper`` under the name and docstring of the async ``call``."""
    wrapper.__name__ = wrapper.__qualname__ = call.__name__
    wrapper.__doc__ = call.__doc__
    return wrapper


def _settings_of(
    _: Callable[Concatenate[Any, P], None],
) -> Callable[[Callable[..., None]], Callable[Concatenate[Any, P], None]]:
    """Type ``__init__`` with the async client's settings (mypy then refuses a
    misspelt one, as for the async client)."""
    return lambda init: init


def _blocking(
    call: Callable[Concatenate[_async.CampaignClient, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[CampaignClient, P], T]:
    def blocking(self: CampaignClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(call(self.aio, *args, **kwargs))

    return _named(blocking, call)


def _iterating(
    call: Callable[Concatenate[_async.CampaignClient, P], AsyncIterator[T]],
) -> Callable[Concatenate[CampaignClient, P], Iterator[T]]:
    def iterating(self: CampaignClient, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return self._iterate(call(self.aio, *args, **kwargs))

    return _named(iterating, call)


def _following(
    call: Callable[Concatenate[_async.CampaignClient, P], A],
    wrapper: Callable[[CampaignClient, A], W],
) -> Callable[Concatenate[CampaignClient, P], W]:
    def following(self: CampaignClient, /, *args: P.args, **kwargs: P.kwargs) -> W:
        return wrapper(self, call(self.aio, *args, **kwargs))

    return _named(following, call)


class CampaignClient:
    """The blocking client; arguments as for :class:`campaignkit.CampaignClient`
    (but ``session=``, an aiohttp session, which belongs to another loop)."""

    @_settings_of(_async.CampaignClient.__init__)
    def __init__(self, *args: Any, **settings: Any) -> None:
        if settings.get("session") is not None:
            raise TypeError("the blocking client makes its own session: session= is not taken")
        self.aio = _async.CampaignClient(*args, **settings)
        """The async client underneath (its calls run on :attr:`loop`)."""
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="campaignkit-sync", daemon=True
        )
        self._thread.start()
        self._closed = threading.Event()  # shared with the copies of with_options
        self._owns_loop = True
        self._recorder = threading.local()

    @property
    def config(self) -> ClientConfig:
        return self.aio.config

    @property
    def transport(self) -> Transport:
        return self.aio.transport

    def with_options(
        self,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Self:
        """As :meth:`campaignkit.CampaignClient.with_options`: a copy whose
        calls default to these options, sharing this client's connections and
        thread (closing the copy leaves them open; closing this client ends
        them for both)."""
        options = copy.copy(self)
        options.aio = self.aio.with_options(
            timeout=timeout, max_retries=max_retries, extra_headers=extra_headers
        )
        options._owns_loop = False
        return options

    def __repr__(self) -> str:
        return f"<sync.CampaignClient {self.config!r}>"

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and end the loop's thread; idempotent (a
        copy made by :meth:`with_options` leaves them to this client)."""
        if self._closed.is_set() or not self._owns_loop:
            return
        try:
            self._run(self.aio.aclose())
        finally:
            self._closed.set()
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join()
            self.loop.close()

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the client's loop and wait for it. An interrupt
        (Ctrl-C) cancels it there and waits for it to end as a cancelled task
        does (a bulk send gives its requests under way their grace); a
        second one cancels it again (a bulk send stops at once) and stops
        waiting."""
        if self._closed.is_set():
            work.close()
            raise CampaignKitError("the client is closed")
        if threading.current_thread() is self._thread:
            work.close()
            raise RuntimeError("a blocking call from the client's own loop would wait forever")
        answers = getattr(self._recorder, "answers", None)
        if answers is not None:
            work = _recorded(work, answers)
        running = _Cancellable(work)
        future = asyncio.run_coroutine_threadsafe(running.run(), self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            self.loop.call_soon_threadsafe(running.cancel)
            try:
                with contextlib.suppress(Exception):
                    future.result()
            except KeyboardInterrupt:
                self.loop.call_soon_threadsafe(running.cancel)
            raise
        except BaseException:
            future.cancel()
            raise

    def _iterate(self, items: AsyncIterator[T]) -> Iterator[T]:
        try:
            while (item := self._run(_next(items))) is not _DONE:
                yield cast(T, item)
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None and not self._closed.is_set():
                self._run(aclose())

    @contextlib.contextmanager
    def raw_answers(self) -> Iterator[list[RawAnswer]]:
        """As :meth:`campaignkit.CampaignClient.raw_answers`, for the calls
        this thread makes inside the block."""
        answers: list[RawAnswer] = []
        self._recorder.answers = answers
        try:
            yield answers
        finally:
            self._recorder.answers = None

    send_campaign = _blocking(_async.CampaignClient.send_campaign)
    get_campaign_status = _blocking(_async.CampaignClient.get_campaign_status)
    update_session = _blocking(_async.CampaignClient.update_session)
    list_sessions = _blocking(_async.CampaignClient.list_sessions)
    iter_sessions = _iterating(_async.CampaignClient.iter_sessions)
    list_agents = _blocking(_async.CampaignClient.list_agents)
    deploy_legacy = _blocking(_async.CampaignClient.deploy_legacy)
    get_session_history = _blocking(_async.CampaignClient.get_session_history)
    list_polls = _blocking(_async.CampaignClient.list_polls)
    send_bulk = _blocking(_async.CampaignClient.send_bulk)
    track = _following(_async.CampaignClient.track, lambda client, aio: Tracker(client, aio))
    track_many = _following(
        _async.CampaignClient.track_many, lambda client, aio: Group(client, aio)
    )


async def _next(items: AsyncIterator[T]) -> T | object:
    try:
        return await anext(items)
    except StopAsyncIteration:
        return _DONE


class _Cancellable(Generic[T]):
    """A coroutine run as a task of the client's loop that another thread
    can cancel (through ``call_soon_threadsafe``), before it starts too."""

    def __init__(self, work: Coroutine[Any, Any, T]) -> None:
        self._work = work
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False

    async def run(self) -> T:
        if self._cancelled:  # before it started
            self._work.close()
            raise asyncio.CancelledError
        self._task = asyncio.current_task()
        return await self._work

    def cancel(self) -> None:
        self._cancelled = True
        if self._task is not None:
            self._task.cancel()


async def _recorded(work: Coroutine[Any, Any, T], answers: list[RawAnswer]) -> T:
    with recording_answers(answers):
        return await work


class _Following(Generic[F]):
    """What a blocking tracker and group share: iteration, updates, counts."""

    def __init__(self, client: CampaignClient, following: F) -> None:
        self._client = client
        self.aio: F = following
        """The async tracker (or group) underneath."""

    def __iter__(self) -> Iterator[DeploymentChange]:
        return self._client._iterate(self.aio)

    def updates(self, every: float = 2.0) -> Iterator[ProgressUpdate]:
        """As the async ``updates()``: throttled progress snapshots."""
        return self._client._iterate(self.aio.updates(every))

    def close(self) -> None:
        """Stop tracking; idempotent."""
        self._client._run(self.aio.aclose())

    @property
    def counts(self) -> Counter[DeploymentStatus | None]:
        return self.aio.counts

    @property
    def progress(self) -> ProgressUpdate:
        return self.aio.progress

    def checkpoint(self) -> dict[str, Any]:
        return self.aio.checkpoint()


class Tracker(_Following[CampaignTracker]):
    """A :class:`campaignkit.CampaignTracker`, iterated without ``await``:
    ``for change in client.track(ack):``."""

    @property
    def state(self) -> CampaignState | None:
        return self.aio.state

    @property
    def result(self) -> CampaignStatus | None:
        return self.aio.result


class Group(_Following[TrackerGroup]):
    """A :class:`campaignkit.tracker.TrackerGroup` (``track_many``), iterated
    without ``await``."""
