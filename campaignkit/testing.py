"""Test your code that uses campaignkit without a network: the I/O seam and a
fake of it, and time that passes at once.

A :class:`CampaignClient` sends every request through an :class:`Exchange`
(``CampaignClient(exchange=...)``); :class:`MockExchange` is one that answers
from a handler or a table, as httpx's ``MockTransport`` does. Everything above
the seam runs for real: validation, retries, error mapping, decoding::

    exchange = MockExchange({"GET /poll/api/all": Answer.json([])})
    async with CampaignClient("key", base_url="https://x", exchange=exchange) as client:
        assert await client.list_polls() == []

:class:`FakeTime` replaces the client's clock and sleep, so retries and
tracker polls that would wait minutes run at once and their waits can be read.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

from . import errors
from ._io.exchange import Answer, Exchange
from ._io.transport import Transport
from ._wire.sansio import Endpoint, Request

__all__ = ["Answer", "Endpoint", "Exchange", "FakeTime", "Handler", "MockExchange", "Request"]

Reply = Answer | BaseException
Handler = Callable[[Request], "Answer | Awaitable[Answer]"]
"""Answers one request (or raises, e.g. :class:`campaignkit.errors.ConnectionError`)."""
Table = Mapping[str, Reply | Sequence[Reply]]


class _HasTransport(Protocol):
    """A client: :class:`campaignkit.CampaignClient` or ``campaignkit.sync``'s."""

    @property
    def transport(self) -> Transport: ...


C = TypeVar("C", bound=_HasTransport)


class MockExchange:
    """An :class:`Exchange` that answers from ``handler`` (a function of the
    :class:`Request`, sync or async) or from a table.

    A table maps ``"METHOD /path"`` (the URL's path, query aside; a base URL's
    path prefix may precede it) to an :class:`Answer` or an exception to raise,
    or to a list of them, given in order, the last one again and again. A
    request the table does not name gets a 404 saying so.
    ``requests`` lists every request received, in order.
    """

    def __init__(self, handler: Handler | Table) -> None:
        self.requests: list[Request] = []
        self.closed = False
        self._handler: Handler | None = None
        self._table: dict[tuple[str, str], list[Reply]] = {}
        if callable(handler):
            self._handler = handler
            return
        for key, replies in handler.items():
            method, _, path = key.partition(" ")
            if not path.startswith("/"):
                raise ValueError(f"table keys are 'METHOD /path', got {key!r}")
            given = [replies] if isinstance(replies, Answer | BaseException) else list(replies)
            if not given:
                raise ValueError(f"no answer given for {key!r}")
            self._table[method.upper(), path.rstrip("/")] = given

    async def __call__(self, request: Request, timeout: float) -> Answer:
        if self.closed:
            raise errors.CampaignKitError("the client is closed")
        self.requests.append(request)
        if self._handler is not None:
            answer = self._handler(request)
            return await answer if inspect.isawaitable(answer) else answer
        reply = self._lookup(request)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def _lookup(self, request: Request) -> Reply:
        method = request.endpoint.method
        path = urlsplit(request.url).path.rstrip("/")
        for (wanted, suffix), replies in self._table.items():
            if wanted == method and (path == suffix or path.endswith(suffix)):
                return replies.pop(0) if len(replies) > 1 else replies[0]
        return Answer.json({"detail": f"MockExchange has no answer for {method} {path}"}, 404)

    async def aclose(self) -> None:
        self.closed = True


class FakeTime:
    """A monotonic clock and a sleep that advances it at once (yielding to
    the loop), for the waits of retries, tracker polls and bulk pacing.

    ``install(client)`` makes ``client`` use it; ``sleeps`` lists every wait.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)

    def install(self, client: C) -> C:
        """Make ``client`` (async or blocking, and what it tracks or sends
        from now on) wait on this fake time; returns ``client``."""
        client.transport.clock = self.clock
        client.transport.sleep = self.sleep
        return client
