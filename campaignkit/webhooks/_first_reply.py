"""The first-reply webhook (deprecated: :func:`webhook_app` answers every kind
of call): answer the service at once, run ``on_reply`` behind.

The handler answers ``202`` and runs ``on_reply`` in a background task, so a
slow callback never makes the service time out; on shutdown those tasks get
``shutdown_grace`` seconds to finish before they are cancelled.

*Shared secret.* The spec does not say how the service authenticates its
calls. With ``secret=`` set, a request must carry the secret in the
``X-Webhook-Secret`` header (``secret_header=`` changes the name) or, when
``secret_query=`` names a query parameter, in that parameter of the URL (for
platforms that only let you enter a URL; a URL may end up in access logs,
so prefer the header when you can). Compared with :func:`hmac.compare_digest`.

*Real payloads.* The response event (and the opt-out and conversation
closed ones) is a reply; delivered, read, timeout, condition and template
status events are answered 200 without calling ``on_reply``, so they never
take a session's first reply.

*Duplicates.* A repeated id is answered 200 and ignored; if ``on_reply``
raises, the id is forgotten so that a redelivery is processed again.
``dedupe=`` takes a ledger the caller opens before serving and closes after the
app has shut down (the handler opens and closes nothing)::

    async with PostgresLedger(dsn) as ledger:
        app = first_reply_app(on_reply, dedupe=ledger)
        ...  # serve it

When it fails (:class:`~campaignkit.errors.LedgerError`) the delivery is
answered 503 without detail (the error is logged), so the service retries it
later; ``on_reply`` is not called.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from .._redaction import register, sdk_logger
from ..errors import LedgerError, ValidationError
from ._answers import error_answer
from ._dedupe import DEDUPE_NAMESPACE, DEFAULT_RETENTION, DedupeStore, Pruner, RecentIds
from ._events import EventKind, parse_event
from ._late import cancel_late
from ._payload import ID_FIELD, ReplyEvent, read_reply
from ._receiver import DEFAULT_MAX_BODY, DEFAULT_SECRET_HEADER

logger = sdk_logger("campaignkit.webhooks")

OnReply = Callable[[ReplyEvent], Awaitable[Any] | Any]

NOT_REPLIES = frozenset(
    {
        EventKind.DELIVERED,
        EventKind.READ,
        EventKind.TIMEOUT,
        EventKind.CONDITION,
        EventKind.TEMPLATE_STATUS,
    }
)
"""Kinds answered 200 without ``on_reply``: nothing the user wrote."""


class FirstReplyHandler:
    """The first-reply webhook handler (also named :data:`first_reply_handler`).

    ``on_reply`` receives a :class:`ReplyEvent`; it may be a coroutine
    function (awaited in a background task) or a plain function (called in
    that task, so keep it quick). :meth:`install` adds it to an application
    (route plus a shutdown hook that finishes its tasks); or route
    :meth:`handle` yourself and ``await handler.aclose()`` on shutdown.
    ``dedupe`` (an open ledger, which the caller closes) replaces the
    in-memory window of ``dedupe_size`` ids (see :mod:`campaignkit.webhooks`);
    ids are forgotten ``retention`` seconds (7 days) after they were seen.
    """

    def __init__(
        self,
        on_reply: OnReply,
        *,
        secret: str | None = None,
        secret_header: str = DEFAULT_SECRET_HEADER,
        secret_query: str | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        dedupe_size: int = 10_000,
        dedupe: DedupeStore | None = None,
        shutdown_grace: float = 10.0,
        retention: float = DEFAULT_RETENTION,
    ) -> None:
        warnings.warn(
            "the first-reply helpers are deprecated: use campaignkit.webhooks.webhook_app, "
            "which answers the service's 200 with keys within its 10 s",
            DeprecationWarning,
            stacklevel=2,
        )
        problems = []
        if max_body < 1:
            problems.append(("max_body", "must be at least 1 byte"))
        if dedupe_size < 0:
            problems.append(("dedupe_size", "must not be negative"))
        if not retention > 0:
            problems.append(("retention", "must be positive"))
        if secret is not None and not secret:
            problems.append(("secret", "must not be empty (use None for no secret)"))
        if problems:
            raise ValidationError(problems)
        self._on_reply = on_reply
        register(secret)  # masked in logs and errors like the API key
        self._secret = None if secret is None else secret.encode()
        self._secret_header = secret_header
        self._secret_query = secret_query
        self.max_body = max_body
        self._dedupe: DedupeStore = RecentIds(dedupe_size) if dedupe is None else dedupe
        # The ids seen were kept for good in a ledger: forgotten after ``retention`` now.
        self._prune = Pruner(self._dedupe, DEDUPE_NAMESPACE, retention)
        self._tasks: set[asyncio.Task[None]] = set()
        self._shutdown_grace = shutdown_grace
        self.received = 0
        """Deliveries accepted (duplicates excluded)."""

    def __repr__(self) -> str:
        secret = "set" if self._secret is not None else "none"
        return f"<FirstReplyHandler secret={secret} pending={len(self._tasks)}>"

    @property
    def pending(self) -> int:
        """``on_reply`` calls still running."""
        return len(self._tasks)

    def install(self, app: web.Application, path: str = "/webhook") -> None:
        """Route ``POST path`` to this handler and finish its tasks on shutdown."""
        app.router.add_post(path, self.handle)
        app.on_shutdown.append(self._on_shutdown)

    async def _on_shutdown(self, _app: web.Application) -> None:
        await self.aclose()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until every scheduled ``on_reply`` has finished (or ``timeout``)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)

    async def aclose(self) -> None:
        """Give running ``on_reply`` tasks ``shutdown_grace`` seconds, then cancel them."""
        await cancel_late(self._tasks, self._shutdown_grace, "on_reply")

    def _authorized(self, request: web.Request) -> bool:
        if self._secret is None:
            return True
        given = request.headers.get(self._secret_header)
        if given is None and self._secret_query is not None:
            given = request.query.get(self._secret_query)
        return given is not None and hmac.compare_digest(given.encode(), self._secret)

    async def _read_body(self, request: web.Request) -> bytes | None:
        if request.content_length is not None and request.content_length > self.max_body:
            return None
        chunks = []
        size = 0
        async for chunk in request.content.iter_any():
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def __call__(self, request: web.Request) -> web.StreamResponse:
        return await self.handle(request)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The aiohttp handler (route ``handler.handle`` yourself, or use :meth:`install`)."""
        if not self._authorized(request):
            return error_answer(401, "unauthorized", "missing or wrong webhook secret")
        body = await self._read_body(request)
        if body is None:
            return error_answer(413, "too_large", f"the body exceeds {self.max_body} bytes")
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return error_answer(400, "bad_json", "the body is not valid JSON")
        if isinstance(payload, dict) and parse_event(payload).kind in NOT_REPLIES:
            # Not what the user wrote: it must not take the session's first-reply slot.
            return web.json_response({"status": "ignored"}, status=200)
        try:
            event = read_reply(payload)
        except ValidationError as exc:
            (path, message), *_ = exc.problems
            return error_answer(422, "no_session_external_id", f"{path}: {message}")
        sid = event.session_external_id
        try:
            await self._prune()
            first = await self._dedupe.first_sighting(DEDUPE_NAMESPACE, sid)
        except LedgerError as exc:
            logger.error("webhook: duplicate detection failed for %s, answered 503: %s", sid, exc)
            busy = "duplicate detection is unavailable; retry later"
            return error_answer(503, "unavailable", busy)
        if not first:
            return web.json_response({"status": "duplicate", ID_FIELD: sid}, status=200)
        self.received += 1
        task = asyncio.get_running_loop().create_task(self._run(event), name=f"on_reply:{sid}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response({"status": "accepted", ID_FIELD: sid}, status=202)

    async def _run(self, event: ReplyEvent) -> None:
        try:
            result = self._on_reply(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("webhook: on_reply failed for %s", event.session_external_id)
            # Forget the id so that a redelivery by the service is processed.
            try:
                await self._dedupe.forget(DEDUPE_NAMESPACE, event.session_external_id)
            except LedgerError as exc:
                logger.error(
                    "webhook: could not forget %s, a redelivery will be ignored: %s",
                    event.session_external_id,
                    exc,
                )


first_reply_handler = FirstReplyHandler
"""A first-reply webhook handler to mount in your own aiohttp app (the
:class:`FirstReplyHandler` constructor): ``first_reply_handler(on_reply,
secret=...).install(app, "/webhook")``."""


WEBHOOK_HANDLER = web.AppKey("campaignkit_first_reply_handler", FirstReplyHandler)
"""``app[WEBHOOK_HANDLER]`` is the handler of an app built by :func:`first_reply_app`."""


def first_reply_app(
    on_reply: OnReply,
    *,
    secret: str | None = None,
    path: str = "/webhook",
    max_body: int = DEFAULT_MAX_BODY,
    secret_header: str = DEFAULT_SECRET_HEADER,
    secret_query: str | None = None,
    dedupe_size: int = 10_000,
    dedupe: DedupeStore | None = None,
    shutdown_grace: float = 10.0,
    retention: float = DEFAULT_RETENTION,
) -> web.Application:
    """An aiohttp application serving the first-reply webhook at ``POST path``.

    Run it with ``web.run_app(app)`` or an ``AppRunner``; the handler is
    ``app[WEBHOOK_HANDLER]``.
    """
    handler = FirstReplyHandler(
        on_reply,
        secret=secret,
        secret_header=secret_header,
        secret_query=secret_query,
        max_body=max_body,
        dedupe_size=dedupe_size,
        dedupe=dedupe,
        shutdown_grace=shutdown_grace,
        retention=retention,
    )
    # The handler enforces max_body itself; keep aiohttp's own limit out of the way.
    app = web.Application(client_max_size=max(max_body, 1024) + 1)
    app[WEBHOOK_HANDLER] = handler
    handler.install(app, path)
    return app
