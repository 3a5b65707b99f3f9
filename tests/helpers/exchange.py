"""A scripted :class:`campaignkit.testing.MockExchange`: the unit tests' service.

Routes answer requests in the order they were added (a route without
``repeat`` answers once); every request is recorded. No network and no
patching of aiohttp: the client under test is built with ``exchange=``.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import orjson
from multidict import CIMultiDict

from campaignkit import errors
from campaignkit.testing import Answer, MockExchange, Request


@attrs.define
class Reply:
    """What a route or a callback answers: ``payload`` is sent as JSON."""

    status: int = 200
    payload: Any = None
    body: bytes | str | None = None
    headers: Mapping[str, str] = attrs.Factory(dict)

    def answer(self) -> Answer:
        if self.body is not None:
            body = self.body.encode() if isinstance(self.body, str) else self.body
        else:
            body = b"" if self.payload is None else orjson.dumps(self.payload)
        return Answer(self.status, CIMultiDict(self.headers), body)


Callback = Callable[[Request], "Reply | Awaitable[Reply]"]


@attrs.define
class Route:
    method: str
    url: str | re.Pattern[str]
    reply: Reply | None
    exception: BaseException | None
    callback: Callback | None
    repeat: bool

    def matches(self, request: Request) -> bool:
        if request.endpoint.method != self.method:
            return False
        if isinstance(self.url, str):
            return request.url == self.url
        return self.url.match(request.url) is not None


class ScriptedExchange(MockExchange):
    """Answers from routes; ``requests`` lists every request it was given."""

    def __init__(self) -> None:
        super().__init__(self._answer)
        self.routes: list[Route] = []
        self.timeouts: list[float] = []

    def add(
        self,
        url: str | re.Pattern[str],
        method: str = "GET",
        *,
        status: int = 200,
        payload: Any = None,
        body: bytes | str | None = None,
        headers: Mapping[str, str] | None = None,
        exception: BaseException | None = None,
        callback: Callback | None = None,
        repeat: bool = False,
    ) -> None:
        reply = Reply(status, payload, body, headers or {})
        self.routes.append(Route(method, url, reply, exception, callback, repeat))

    def get(self, url: str | re.Pattern[str], **options: Any) -> None:
        self.add(url, "GET", **options)

    def post(self, url: str | re.Pattern[str], **options: Any) -> None:
        self.add(url, "POST", **options)

    def put(self, url: str | re.Pattern[str], **options: Any) -> None:
        self.add(url, "PUT", **options)

    def calls(self, method: str | None = None, url: str | None = None) -> list[Request]:
        """The requests recorded, of one method and URL if given."""
        return [
            r
            for r in self.requests
            if (method is None or r.endpoint.method == method) and (url is None or r.url == url)
        ]

    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests recorded, in order."""
        return [orjson.loads(r.body) for r in self.requests if r.body]

    async def __call__(self, request: Request, timeout: float) -> Answer:
        self.timeouts.append(timeout)
        return await super().__call__(request, timeout)

    async def _answer(self, request: Request) -> Answer:
        for route in self.routes:
            if route.matches(request):
                if not route.repeat:
                    self.routes.remove(route)
                break
        else:
            raise errors.ConnectionError(
                f"no route scripted for {request.endpoint.method} {request.url}",
                request_sent=False,
            )
        if route.exception is not None:
            raise route.exception
        if route.callback is not None:
            reply = route.callback(request)
            if inspect.isawaitable(reply):
                reply = await reply
            assert isinstance(reply, Reply)
            return reply.answer()
        assert route.reply is not None
        return route.reply.answer()


def sent_before_any_byte(message: str = "connection refused") -> errors.ConnectionError:
    """A connect failure: the request surely never left."""
    return errors.ConnectionError(message, request_sent=False)


def dropped_after_sending(message: str = "server disconnected") -> errors.ConnectionError:
    """A connection lost once the request was written: it may have arrived."""
    return errors.ConnectionError(message, request_sent=True)


def timed_out_after_sending(message: str = "no answer in time") -> errors.TimeoutError:
    return errors.TimeoutError(message, request_sent=True)
