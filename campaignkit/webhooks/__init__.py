"""Your server's side of the calls the service makes.

**Webhooks.** The service POSTs one JSON body per event of a flow (a
response to each question, delivered, read, opt-out, timeout, condition,
conversation closed) and per account event (template status), with the static
headers you configured on it, and waits at most 10 s for the answer: the
``user_session_keys`` of a ``200`` answer are merged into the session at once.
:func:`parse_event` reads any body into a :class:`WebhookEvent` (the
question, condition and template fields typed as :class:`Question`,
:class:`Condition`, :class:`TemplateStatus`). One receiver serves them, in
aiohttp (:func:`webhook_app`, or :func:`webhook_handler` in your own app),
in FastAPI, Starlette or any ASGI server (:func:`asgi_app`, with the
``fastapi`` or ``starlette`` extra for those frameworks) or in Django
(:func:`django_view`, with the ``django`` extra)::

    async def on_event(event: WebhookEvent) -> dict[str, str] | None:
        if event.kind is EventKind.RESPONSE:
            return {"server_user_valid": "yes" if valid(event.answer) else "no"}
        return None

    app = webhook_app(on_event, secret=os.environ["WEBHOOK_SECRET"], client=client)

Each mount takes the same options and answers alike:

======  ==================================================================
200     ``{"user_session_keys": [...]}``: what ``on_event`` returned within
        ``deadline`` (default 8 s), else empty (late keys go out by
        ``update_session`` when ``client=`` is given); also for a repeated
        delivery, a kind outside ``kinds=``, or a failing ``on_event``
        (the error logged); a body of no published kind reaches
        ``on_event`` as ``UNKNOWN``
400     the body is not JSON (or nests too deep) or not a JSON object
401     ``secret=`` is set and the ``secret_header`` (default
        ``X-Webhook-Secret``) does not carry exactly that value
413     the body is larger than ``max_body`` bytes (default 1 MiB)
422     an id or value that may not be stored or logged (over
        :data:`MAX_ID_LENGTH` characters, not printable), or a session
        event without its id
503     the ``dedupe=`` store failed: ``on_event`` was not called
======  ==================================================================

*Duplicates.* A delivery is remembered by a digest of its whole body (or its
``event_id``), so the same call sent twice is handled once while different
answers of one session each are. Records expire after ``retention`` (default
:data:`DEFAULT_RETENTION`, 7 days) and are pruned as deliveries arrive.
``dedupe=`` takes a ledger (:class:`~campaignkit.ledger.PostgresLedger` for
replicas); ``ledger=`` any :class:`EventRecorder`, called with each event.

The first-reply helpers of earlier releases (:func:`first_reply_app`,
:func:`first_reply_handler`, :func:`extract_reply`) read real payloads too,
and are deprecated.

**Assignment endpoint.** :class:`AgentPicker` caches :meth:`list_agents` for
``ttl`` seconds, filters by tag, picks round robin or least recently assigned,
and :meth:`AgentPicker.handler` answers with ``{"agent_id": 17}`` (or
``{"agent_email": "ana@example.com"}`` with ``answer="email"``; ``render=``,
e.g. :func:`plain_text`, answers otherwise).

Option mistakes raise :class:`~campaignkit.errors.ValidationError`.
``NoAgentAvailable`` is a deprecated alias of :class:`NoAgentAvailableError`.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from ._agents import (
    AgentPicker,
    AgentSource,
    NoAgentAvailableError,
    agent_json,
    plain_text,
)
from ._aiohttp import WEBHOOK_RECEIVER, WebhookHandler, webhook_app, webhook_handler
from ._asgi import ASGIReceiver, asgi_app
from ._checks import MAX_ID_LENGTH, MAX_VALUE_LENGTH
from ._dedupe import DEDUPE_NAMESPACE, DEFAULT_RETENTION, EVENTS_NAMESPACE, DedupeStore
from ._django import DjangoView, django_view
from ._events import Condition, EventKind, Question, TemplateStatus, WebhookEvent, parse_event
from ._first_reply import (
    WEBHOOK_HANDLER,
    FirstReplyHandler,
    first_reply_app,
    first_reply_handler,
)
from ._payload import MAX_DEPTH, NESTING_KEYS, ReplyEvent, extract_reply
from ._receiver import (
    DEFAULT_DEADLINE,
    DEFAULT_MAX_BODY,
    DEFAULT_SECRET_HEADER,
    EventRecorder,
    SessionUpdater,
)

__all__ = [
    "DEDUPE_NAMESPACE",
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_BODY",
    "DEFAULT_RETENTION",
    "DEFAULT_SECRET_HEADER",
    "EVENTS_NAMESPACE",
    "MAX_DEPTH",
    "MAX_ID_LENGTH",
    "MAX_VALUE_LENGTH",
    "NESTING_KEYS",
    "ASGIReceiver",
    "AgentPicker",
    "AgentSource",
    "Condition",
    "DedupeStore",
    "DjangoView",
    "EventKind",
    "EventRecorder",
    "FirstReplyHandler",
    "SessionUpdater",
    "TemplateStatus",
    "WebhookEvent",
    "WebhookHandler",
    "WEBHOOK_RECEIVER",
    "NoAgentAvailable",
    "NoAgentAvailableError",
    "Question",
    "ReplyEvent",
    "WEBHOOK_HANDLER",
    "agent_json",
    "asgi_app",
    "django_view",
    "extract_reply",
    "first_reply_app",
    "first_reply_handler",
    "parse_event",
    "plain_text",
    "webhook_app",
    "webhook_handler",
]

if TYPE_CHECKING:
    NoAgentAvailable = NoAgentAvailableError
else:

    def __getattr__(name: str) -> type[NoAgentAvailableError]:
        if name == "NoAgentAvailable":
            warnings.warn(
                "campaignkit.webhooks.NoAgentAvailable is deprecated: use NoAgentAvailableError",
                DeprecationWarning,
                stacklevel=2,
            )
            return NoAgentAvailableError
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
