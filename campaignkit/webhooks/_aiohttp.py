"""The receiver mounted in aiohttp: :func:`webhook_handler` and :func:`webhook_app`."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from ._answers import aiohttp_response
from ._receiver import OnEvent, Receiver


class WebhookHandler(Receiver):
    """The receiver as an aiohttp handler (see :mod:`campaignkit.webhooks`).

    :meth:`install` routes it into your application with a shutdown hook; or
    route :meth:`handle` yourself and ``await handler.aclose()`` on shutdown.
    """

    def install(self, app: web.Application, path: str = "/webhook") -> None:
        """Route ``POST path`` to this handler and finish its tasks on shutdown."""
        app.router.add_post(path, self.handle)
        app.on_shutdown.append(self._on_shutdown)

    async def _on_shutdown(self, _app: web.Application) -> None:
        await self.aclose()

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        return await self.handle(request)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The aiohttp handler: ``200 {"user_session_keys": [...]}`` or a 4xx/503."""
        given = request.headers.get(self.secret_header)
        raw = None if given is None else given.encode("utf-8", "replace")

        async def read_body(limit: int) -> bytes | None:
            return await _read_body(request, limit)

        return aiohttp_response(await self.answer(raw, read_body))


async def _read_body(request: web.Request, limit: int) -> bytes | None:
    length = request.content_length
    if length is not None:
        if length > limit:
            return None
        # The length is the body's: the stream yields no more than it says.
        try:
            return await request.content.readexactly(length) if length else b""
        except asyncio.IncompleteReadError as cut:
            return cut.partial  # a body cut short is not JSON: answered 400
    chunks, size = [], 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


webhook_handler = WebhookHandler
"""A webhook receiver to mount in your own aiohttp app (the
:class:`WebhookHandler` constructor): ``webhook_handler(on_event).install(app, "/webhook")``."""

WEBHOOK_RECEIVER = web.AppKey("campaignkit_webhook_handler", WebhookHandler)
"""``app[WEBHOOK_RECEIVER]`` is the handler of an app built by :func:`webhook_app`."""


def webhook_app(on_event: OnEvent, *, path: str = "/webhook", **options: Any) -> web.Application:
    """An aiohttp application serving :class:`WebhookHandler` at ``POST path``
    (``options`` are the handler's)."""
    handler = WebhookHandler(on_event, **options)
    # The handler enforces max_body itself; keep aiohttp's own limit out of the way.
    app = web.Application(client_max_size=max(handler.max_body, 1024) + 1)
    app[WEBHOOK_RECEIVER] = handler
    handler.install(app, path)
    return app
