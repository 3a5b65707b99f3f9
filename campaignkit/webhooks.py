"""Server-side helpers for the two calls the service makes to *your* server.

**First-reply webhook.** When a user first answers a deployed conversation the
service POSTs to your webhook; the call carries ``session_external_id`` (use it
with :meth:`CampaignClient.update_session`) and may carry the session
variables. :func:`first_reply_app` builds a ready aiohttp application for it,
:func:`first_reply_handler` a handler to mount in your own app::

    async def on_reply(event: ReplyEvent) -> None:
        await client.update_session(event.session_external_id, {"tier": "gold"})

    app = first_reply_app(on_reply, secret=os.environ["WEBHOOK_SECRET"])
    web.run_app(app, port=8080)

The handler answers at once (``202 {"status": "accepted", ...}``) and runs
``on_reply`` in a background task, so a slow callback never makes the service
time out. Those tasks are tracked and, on application shutdown, given
``shutdown_grace`` seconds to finish before they are cancelled. Answers:

======  ==================================================================
202     accepted: ``on_reply`` was scheduled
200     duplicate delivery of an id seen before (``"status": "duplicate"``);
        ``on_reply`` is not called again
400     the body is not JSON (or is empty)
401     a ``secret`` is configured and the request does not carry it
413     the body is larger than ``max_body`` bytes (default 1 MiB)
422     JSON without a usable ``session_external_id``
503     the ``dedupe=`` ledger failed: the service should deliver again later
======  ==================================================================

Error answers are ``{"error": <code>, "message": <text>}``.

*Payload shape.* The spec does not publish it; it only says the call carries
``session_external_id`` and may deliver ``user_session_keys``. The handler
looks for ``session_external_id`` (a non-empty string, or an integer) at the
top level of the JSON object first, then inside the objects found under the
keys in :data:`NESTING_KEYS` (``data``, ``session``, ``payload``, ``event``,
``body``, ``webhook``, ``message``), breadth first, at most
:data:`MAX_DEPTH` levels deep (``{"data": {"session": {...}}}`` is found).
``user_session_keys`` is read from the object where the id was found, else
from the top level; it may be a list of ``{"key", "value"}`` objects or a
``{key: value}`` mapping (malformed entries are skipped and logged). The whole
decoded payload is kept on :attr:`ReplyEvent.payload`.

*Shared secret.* The spec does not say how the service authenticates its
calls. With ``secret=`` set, a request must carry the secret in the
``X-Webhook-Secret`` header (``secret_header=`` changes the name) or, when
``secret_query=`` names a query parameter, in that parameter of the URL (for
platforms that only let you enter a URL; a URL may end up in access logs,
so prefer the header when you can). Compared with :func:`hmac.compare_digest`.

*Duplicates.* The ids of the last ``dedupe_size`` (default 10,000) accepted
deliveries are remembered in memory (LRU); a repeat is answered 200 and
ignored. If ``on_reply`` raises, the id is forgotten, so a redelivery is
processed again. Memory dies with the process and is not shared: a restarted
receiver, or one of several replicas behind a load balancer, would run
``on_reply`` again for a redelivered webhook. ``dedupe=`` takes a ledger
instead (:class:`~campaignkit.ledger.SqliteLedger` for one machine,
:class:`~campaignkit.ledger.PostgresLedger` for replicas; any
:class:`DedupeStore` will do), which keeps the ids under the namespace
:data:`DEDUPE_NAMESPACE` (``"first_reply"``) for good, and ``dedupe_size`` is
not used. The handler opens and closes nothing: open the ledger before
serving and close it after the app has shut down::

    async with PostgresLedger(dsn) as ledger:
        app = first_reply_app(on_reply, dedupe=ledger)
        ...  # serve it

When the ledger fails (:class:`~campaignkit.errors.LedgerError`), the delivery
is answered 503 without detail (the error is logged), so the service retries
it later; ``on_reply`` is not called.

**Assignment endpoint.** A transfer-methods block with an API destination calls
your endpoint, which answers with an agent ``id`` (recommended) or ``email``
from the agent listing. :class:`AgentPicker` caches :meth:`list_agents` for
``ttl`` seconds, filters by tag, picks round robin or least recently assigned,
and :meth:`AgentPicker.handler` answers with ``{"agent_id": 17}`` (or
``{"agent_email": "ana@example.com"}`` with ``answer="email"``). The response
shape is not published either: pass ``render=`` (e.g. :func:`plain_text`) to
answer otherwise.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal, Protocol

import attrs
import orjson
from aiohttp import web

from .errors import CampaignKitError, LedgerError
from .models import Agent, SessionKey

__all__ = [
    "DEDUPE_NAMESPACE",
    "DEFAULT_MAX_BODY",
    "DEFAULT_SECRET_HEADER",
    "MAX_DEPTH",
    "NESTING_KEYS",
    "AgentPicker",
    "AgentSource",
    "DedupeStore",
    "FirstReplyHandler",
    "NoAgentAvailable",
    "ReplyEvent",
    "WEBHOOK_HANDLER",
    "agent_json",
    "extract_reply",
    "first_reply_app",
    "first_reply_handler",
    "plain_text",
]

logger = logging.getLogger("campaignkit.webhooks")

DEFAULT_SECRET_HEADER = "X-Webhook-Secret"
DEFAULT_MAX_BODY = 1024 * 1024
NESTING_KEYS: tuple[str, ...] = (
    "data",
    "session",
    "payload",
    "event",
    "body",
    "webhook",
    "message",
)
MAX_DEPTH = 3
ID_FIELD = "session_external_id"
DEDUPE_NAMESPACE = "first_reply"
"""The namespace of the session ids a ``dedupe=`` ledger keeps."""
KEYS_FIELD = "user_session_keys"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OnReply = Callable[["ReplyEvent"], Awaitable[Any] | Any]


@attrs.frozen
class ReplyEvent:
    """One first-reply webhook delivery.

    ``user_session_keys`` are the variables delivered with it (empty when none
    were); ``payload`` is the whole decoded JSON body, as sent.
    """

    session_external_id: str
    user_session_keys: tuple[SessionKey, ...] = ()
    payload: Any = attrs.field(default=None, eq=False, repr=False)

    @property
    def keys(self) -> dict[str, str]:
        """The session variables as a dict (a later duplicate key wins)."""
        return {k.key: k.value for k in self.user_session_keys}


class DedupeStore(Protocol):
    """Where delivered session ids are remembered (a ledger of
    :mod:`campaignkit.ledger`); failures raise :class:`LedgerError`."""

    async def first_sighting(self, namespace: str, key: str) -> bool:
        """Remember ``key``; True the first time it is seen in ``namespace``."""
        ...

    async def forget(self, namespace: str, key: str) -> None: ...


class _RecentIds:
    """The default :class:`DedupeStore`: the last ``size`` ids, in memory (LRU)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._seen: OrderedDict[str, None] = OrderedDict()

    async def first_sighting(self, namespace: str, key: str) -> bool:
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        if self._size:
            self._seen[key] = None
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)
        return True

    async def forget(self, namespace: str, key: str) -> None:
        self._seen.pop(key, None)


class _Unusable(ValueError):
    """The payload has no usable session_external_id."""


def _find_id_holder(payload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    level: list[Mapping[str, Any]] = [payload]
    for _ in range(MAX_DEPTH + 1):
        for node in level:
            if ID_FIELD in node:
                return node
        level = [
            child
            for node in level
            for name in NESTING_KEYS
            if isinstance(child := node.get(name), Mapping)
        ]
        if not level:
            break
    return None


def _session_keys(raw: Any) -> tuple[SessionKey, ...]:
    items: Iterable[tuple[Any, Any]]
    if raw is None:
        return ()
    if isinstance(raw, Mapping):
        items = raw.items()
    elif isinstance(raw, list):
        pairs = []
        for entry in raw:
            if isinstance(entry, Mapping) and "key" in entry and "value" in entry:
                pairs.append((entry["key"], entry["value"]))
            else:
                logger.warning("webhook: skipped a malformed user_session_keys entry: %r", entry)
        items = pairs
    else:
        logger.warning("webhook: ignored user_session_keys of type %s", type(raw).__name__)
        return ()
    keys = []
    for key, value in items:
        if isinstance(key, str) and key and isinstance(value, str | int | float | bool):
            keys.append(SessionKey(key, value if isinstance(value, str) else _scalar(value)))
        else:
            logger.warning("webhook: skipped session variable %r=%r", key, value)
    return tuple(keys)


def _scalar(value: int | float | bool) -> str:
    return orjson.dumps(value).decode()


def extract_reply(payload: Any) -> ReplyEvent:
    """The :class:`ReplyEvent` of a decoded webhook payload (see the module
    docs for where ``session_external_id`` is looked for).

    Raises :class:`ValueError` when no usable id is found.
    """
    if not isinstance(payload, Mapping):
        raise _Unusable(f"the body must be a JSON object, got {type(payload).__name__}")
    holder = _find_id_holder(payload)
    if holder is None:
        raise _Unusable(f"no {ID_FIELD} in the payload")
    raw_id = holder[ID_FIELD]
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        raise _Unusable(f"{ID_FIELD} must be a string, got {type(raw_id).__name__}")
    session_id = str(raw_id).strip()
    if not session_id:
        raise _Unusable(f"{ID_FIELD} is empty")
    raw_keys = holder.get(KEYS_FIELD, payload.get(KEYS_FIELD))
    return ReplyEvent(session_id, _session_keys(raw_keys), payload)


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)


class FirstReplyHandler:
    """The first-reply webhook handler (also named :data:`first_reply_handler`).

    ``on_reply`` receives a :class:`ReplyEvent`; it may be a coroutine
    function (awaited in a background task) or a plain function (called in
    that task, so keep it quick). :meth:`install` adds it to an application
    (route plus a shutdown hook that finishes its tasks); or route
    :meth:`handle` yourself and ``await handler.aclose()`` on shutdown.
    ``dedupe`` (an open ledger, which the caller closes) replaces the
    in-memory window of ``dedupe_size`` ids (see the module docs).
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
    ) -> None:
        if max_body < 1:
            raise ValueError("max_body must be at least 1 byte")
        if dedupe_size < 0:
            raise ValueError("dedupe_size must not be negative")
        if secret is not None and not secret:
            raise ValueError("secret must not be empty (use None for no secret)")
        self._on_reply = on_reply
        self._secret = None if secret is None else secret.encode()
        self._secret_header = secret_header
        self._secret_query = secret_query
        self.max_body = max_body
        self._dedupe: DedupeStore = _RecentIds(dedupe_size) if dedupe is None else dedupe
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
        await self.drain(self._shutdown_grace)
        tasks = set(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            logger.warning("webhook: cancelled %d on_reply task(s) at shutdown", len(tasks))
            await asyncio.gather(*tasks, return_exceptions=True)

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
            return _error(401, "unauthorized", "missing or wrong webhook secret")
        body = await self._read_body(request)
        if body is None:
            return _error(413, "too_large", f"the body exceeds {self.max_body} bytes")
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _error(400, "bad_json", "the body is not valid JSON")
        try:
            event = extract_reply(payload)
        except ValueError as exc:
            return _error(422, "no_session_external_id", str(exc))
        sid = event.session_external_id
        try:
            first = await self._dedupe.first_sighting(DEDUPE_NAMESPACE, sid)
        except LedgerError as exc:
            logger.error("webhook: duplicate detection failed for %s, answered 503: %s", sid, exc)
            return _error(503, "unavailable", "duplicate detection is unavailable; retry later")
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
    )
    # The handler enforces max_body itself; keep aiohttp's own limit out of the way.
    app = web.Application(client_max_size=max(max_body, 1024) + 1)
    app[WEBHOOK_HANDLER] = handler
    handler.install(app, path)
    return app


# -- assignment endpoint -------------------------------------------------------


class NoAgentAvailable(CampaignKitError):
    """No active agent (of the configured tag) can take the conversation."""


Strategy = Literal["round_robin", "least_recent"]
Answer = Literal["id", "email"]
Render = Callable[[Agent, "Answer"], web.StreamResponse]


def agent_json(agent: Agent, answer: Answer) -> web.StreamResponse:
    """The default answer: ``{"agent_id": 17}`` or ``{"agent_email": "..."}``."""
    if answer == "email":
        return web.json_response({"agent_email": agent.email})
    return web.json_response({"agent_id": agent.id})


def plain_text(agent: Agent, answer: Answer) -> web.StreamResponse:
    """Answer with the bare id (``17``) or e-mail as ``text/plain``."""
    return web.Response(text=agent.email if answer == "email" else str(agent.id))


class AgentSource(Protocol):
    """What :class:`AgentPicker` needs of a client."""

    async def list_agents(self) -> list[Agent]: ...


class AgentPicker:
    """Picks the agent an assignment endpoint answers with.

    ``client`` is anything with an awaitable ``list_agents()`` (a
    :class:`~campaignkit.CampaignClient`). Its answer is cached for ``ttl``
    seconds; when a refresh fails and an older list exists, the older list is
    used (and the failure logged). ``tag`` keeps the agents having a tag of
    that name (a ``str``, compared case-insensitively) or id (an ``int``).
    ``strategy`` is ``"round_robin"`` (in order of agent id, continuing after
    the last agent picked even when the list changes) or ``"least_recent"``
    (the agent assigned longest ago; never-assigned agents first).
    """

    def __init__(
        self,
        client: AgentSource,
        tag: str | int | None = None,
        ttl: float = 60.0,
        strategy: Strategy = "round_robin",
        answer: Answer = "id",
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if strategy not in ("round_robin", "least_recent"):
            raise ValueError(f"strategy must be 'round_robin' or 'least_recent', not {strategy!r}")
        if answer not in ("id", "email"):
            raise ValueError(f"answer must be 'id' or 'email', not {answer!r}")
        if ttl < 0:
            raise ValueError("ttl must not be negative")
        self._client = client
        self.tag = tag
        self.ttl = ttl
        self.strategy: Strategy = strategy
        self.answer: Answer = answer
        self._clock = clock
        self._cache: list[Agent] | None = None
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()
        self._last_id: int | None = None
        self._last_assigned: dict[int, int] = {}
        self._assignments = 0
        self.fetches = 0
        """How many times ``list_agents`` was called."""

    def invalidate(self) -> None:
        """Drop the cached agent list; the next pick fetches it again."""
        self._cache = None

    def _matches(self, agent: Agent) -> bool:
        if self.tag is None:
            return True
        if isinstance(self.tag, int):
            return any(t.id == self.tag for t in agent.tags)
        wanted = self.tag.casefold()
        return any(t.name.casefold() == wanted for t in agent.tags)

    async def agents(self) -> list[Agent]:
        """The active agents of the tag, by id, from the cache when fresh."""
        async with self._lock:
            fresh = self._cache is not None and self._clock() - self._fetched_at < self.ttl
            if not fresh:
                try:
                    listed = await self._client.list_agents()
                except CampaignKitError:
                    if self._cache is None:
                        raise
                    logger.warning(
                        "assignment: list_agents failed, using the cached list", exc_info=True
                    )
                else:
                    self.fetches += 1
                    self._cache = sorted(
                        (a for a in listed if self._matches(a)), key=lambda a: a.id
                    )
                    self._fetched_at = self._clock()
            assert self._cache is not None
            return list(self._cache)

    async def pick(self) -> Agent:
        """The next agent by the strategy; :class:`NoAgentAvailable` if none."""
        agents = await self.agents()
        if not agents:
            tag = "" if self.tag is None else f" with tag {self.tag!r}"
            raise NoAgentAvailable(f"no active agent{tag}")
        if self.strategy == "least_recent":
            chosen = min(agents, key=lambda a: (self._last_assigned.get(a.id, -1), a.id))
        else:
            last = self._last_id
            chosen = next((a for a in agents if last is None or a.id > last), agents[0])
        self._assignments += 1
        self._last_assigned[chosen.id] = self._assignments
        self._last_id = chosen.id
        return chosen

    def handler(self, render: Render | None = None) -> Handler:
        """An aiohttp handler (any method) answering with the picked agent.

        Default answer: :func:`agent_json`. No agent: ``503 {"error":
        "no_agent"}``; the agent listing failing with no cached list: ``502
        {"error": "agent_listing_failed"}``.
        """
        render_fn = render or agent_json

        async def assign(request: web.Request) -> web.StreamResponse:
            try:
                agent = await self.pick()
            except NoAgentAvailable as exc:
                return _error(503, "no_agent", str(exc))
            except CampaignKitError as exc:
                logger.error("assignment: list_agents failed: %s", exc)
                return _error(502, "agent_listing_failed", "the agent listing failed")
            return render_fn(agent, self.answer)

        return assign
