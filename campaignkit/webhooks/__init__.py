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

The handler answers at once and runs ``on_reply`` in a background task.
Answers:

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

Error answers are ``{"error": <code>, "message": <text>}``. Where the id is
looked for in the payload: :func:`extract_reply`; the whole decoded payload is
kept on :attr:`ReplyEvent.payload`.

*Duplicates.* The ids of the last ``dedupe_size`` (default 10,000) accepted
deliveries are remembered in memory (LRU). ``dedupe=`` takes a ledger instead
(:class:`~campaignkit.ledger.SqliteLedger` for one machine,
:class:`~campaignkit.ledger.PostgresLedger` for replicas; any
:class:`DedupeStore` will do), which keeps the ids under the namespace
:data:`DEDUPE_NAMESPACE` (``"first_reply"``) for good, and ``dedupe_size`` is
not used.

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
from ._dedupe import DEDUPE_NAMESPACE, DedupeStore
from ._first_reply import (
    DEFAULT_MAX_BODY,
    DEFAULT_SECRET_HEADER,
    WEBHOOK_HANDLER,
    FirstReplyHandler,
    first_reply_app,
    first_reply_handler,
)
from ._payload import MAX_DEPTH, NESTING_KEYS, ReplyEvent, extract_reply

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
    "NoAgentAvailableError",
    "ReplyEvent",
    "WEBHOOK_HANDLER",
    "agent_json",
    "extract_reply",
    "first_reply_app",
    "first_reply_handler",
    "plain_text",
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
