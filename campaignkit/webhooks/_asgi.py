"""The receiver as an ASGI application: FastAPI, Starlette, any ASGI server.

Plain ASGI 3, so no framework is needed to import or run it. Served alone
(``uvicorn module:app``) it finishes its late callbacks at the lifespan
shutdown; mounted in a FastAPI or Starlette app, whose mounts get no
lifespan, ``await receiver.aclose()`` in the app's own lifespan.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ._answers import Answer, refusal
from ._receiver import OnEvent, Receiver

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ASGIReceiver(Receiver):
    """The receiver as an ASGI application (see :func:`asgi_app`): it answers
    every ``POST`` to the path it is mounted at, whatever follows that path."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await _send(send, await self._http(scope, receive))

    async def _http(self, scope: Scope, receive: Receive) -> Answer:
        if scope["method"] != "POST":
            return refusal(405, "method_not_allowed", "the webhook answers POST only")
        secret_name = self.secret_header.lower().encode("latin-1")
        headers = {name.lower(): value for name, value in reversed(scope["headers"])}

        async def read_body(limit: int) -> bytes | None:
            return await _read_body(receive, headers.get(b"content-length"), limit)

        return await self.answer(headers.get(secret_name), read_body)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


async def _read_body(receive: Receive, length: bytes | None, limit: int) -> bytes | None:
    if length is not None and length.isdigit() and int(length) > limit:
        return None
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break  # a body cut short is not JSON: answered 400 (to nobody)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send(send: Send, answer: Answer) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(answer.body)).encode()),
    ]
    if answer.status == 405:
        headers.append((b"allow", b"POST"))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


def asgi_app(on_event: OnEvent, **options: Any) -> ASGIReceiver:
    """The webhook receiver as an ASGI application (``options`` are those of
    :func:`webhook_handler`): ``app.mount("/webhook", asgi_app(on_event))`` in
    FastAPI or Starlette, or served alone by any ASGI server."""
    return ASGIReceiver(on_event, **options)
