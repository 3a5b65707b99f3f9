"""What the service POSTs to your server, read from the decoded JSON body.

The kinds and their fields are the service's published ones: flat events
carry ``session_id``, the conversation-closed event ``session.external_id``,
the template status event none. :func:`parse_event` tells them apart by their
fields and never raises for a JSON object: a shape it does not know is
:attr:`EventKind.UNKNOWN`, its payload kept.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from .._redaction import sdk_logger
from ..models import SessionKey

__all__ = ["EventKind", "WebhookEvent", "parse_event"]

logger = sdk_logger("campaignkit.webhooks")

_SPEC_ID = "session_external_id"


class EventKind(enum.Enum):
    """The kinds of calls the service makes, as its documentation lists them."""

    RESPONSE = "response"
    DELIVERED = "delivered"
    READ = "read"
    OPT_OUT = "opt_out"
    TIMEOUT = "timeout"
    CONDITION = "condition"
    CONVERSATION_CLOSED = "conversation_closed"
    TEMPLATE_STATUS = "template_status"
    UNKNOWN = "unknown"


# The field whose time an event happened at, by kind (closed and template
# status events are read apart: their times are nested or ISO 8601).
_TIME_FIELD = {
    EventKind.RESPONSE: "responded_at",
    EventKind.DELIVERED: "delivered_at",
    EventKind.READ: "read_at",
    EventKind.OPT_OUT: "sent_at",
    EventKind.TIMEOUT: "timeout_at",
}


@attrs.frozen
class WebhookEvent:
    """One call of the service to your webhook.

    ``session_id`` is the id to give :meth:`CampaignClient.update_session`
    (None where the event has none); ``occurred_at`` an aware UTC datetime
    (None when absent or unreadable); ``payload`` the decoded body, as sent.
    """

    kind: EventKind
    session_id: str | None = None
    country_code: str | None = None
    cellphone: str | None = None
    conversation_id: str | None = None
    occurred_at: datetime | None = None
    user_session_keys: tuple[SessionKey, ...] = ()
    event_id: str | None = None
    payload: Any = attrs.field(default=None, eq=False, repr=False)

    @property
    def keys(self) -> dict[str, str]:
        """The session variables as a dict (a later duplicate key wins)."""
        return {k.key: k.value for k in self.user_session_keys}

    @property
    def answer(self) -> str | None:
        """What the user wrote (``actual_response`` of a response event)."""
        value = _mapping(self.payload).get("actual_response")
        return value if isinstance(value, str) else None


def parse_event(payload: Any) -> WebhookEvent:
    """The :class:`WebhookEvent` of a decoded webhook body; never raises.

    Anything but a JSON object is an ``UNKNOWN`` event with the payload kept.
    """
    body = _mapping(payload)
    kind = _kind(body)
    session = _mapping(body.get("session"))
    user = _mapping(body.get("user"))
    if kind is EventKind.CONVERSATION_CLOSED:
        session_id = _text(session.get("external_id"))
        occurred = _time(session.get("closed_at"))
    elif kind is EventKind.TEMPLATE_STATUS:
        session_id, occurred = None, _time(body.get("timestamp"))
    else:
        session_id = _text(body.get("session_id"))
        if session_id is None:
            session_id = _text(body.get(_SPEC_ID))
        field = _TIME_FIELD.get(kind)
        occurred = _time(body.get(field)) if field else None
    return WebhookEvent(
        kind=kind,
        session_id=session_id,
        country_code=_text(body.get("country_code", user.get("country_code"))),
        cellphone=_text(body.get("cellphone", user.get("cellphone"))),
        conversation_id=_text(body.get("conversation_id")),
        occurred_at=occurred,
        user_session_keys=session_keys_of(body.get("user_session_keys")),
        event_id=_text(body.get("event_id")),
        payload=payload,
    )


def _kind(body: Mapping[str, Any]) -> EventKind:
    session = body.get("session")
    if body.get("event_type") == "hsm.status":
        return EventKind.TEMPLATE_STATUS
    if isinstance(session, Mapping) and ("external_id" in session or "closed_at" in session):
        return EventKind.CONVERSATION_CLOSED
    if body.get("reason") == "OPTOUT":
        return EventKind.OPT_OUT
    if "responded_at" in body or "actual_response" in body:
        return EventKind.RESPONSE
    if "timeout_at" in body:
        return EventKind.TIMEOUT
    if isinstance(body.get("variable"), Mapping) and isinstance(body.get("condition"), Mapping):
        return EventKind.CONDITION
    if "read_at" in body:
        return EventKind.READ
    if "delivered_at" in body:
        return EventKind.DELIVERED
    return EventKind.UNKNOWN


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    """A string or integer id as text (ids were integers once); else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _time(value: Any) -> datetime | None:
    """``YYYY-MM-DD HH:MM:SS[.ffffff]`` (UTC) or ISO 8601 as an aware UTC datetime."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        # An offset may carry year 1 or 9999 out of range: OverflowError.
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def session_keys_of(raw: Any) -> tuple[SessionKey, ...]:
    """The session variables of a payload: ``{key, value, type?}`` items or a
    ``{key: value}`` mapping; malformed entries are skipped. A value that is
    not text is kept as its JSON text."""
    if type(raw) is list:
        items = [
            (entry.get("key"), entry.get("value"), entry.get("type"))
            if isinstance(entry, dict)
            else (None, None, None)
            for entry in raw
        ]
    elif isinstance(raw, Mapping):
        items = [(key, value, None) for key, value in raw.items()]
    else:
        return ()
    keys = []
    for key, value, kind in items:
        if type(key) is not str or not key:
            continue
        if type(value) is not str:
            if not isinstance(value, int | float):  # bool is an int
                continue
            value = json.dumps(value)
        keys.append(SessionKey(key, value, kind if type(kind) is str else None))
    if len(keys) < len(items):
        # Counted, never shown: the entries are the sender's raw text.
        logger.warning(
            "webhook: skipped %d malformed user_session_keys entries", len(items) - len(keys)
        )
    return tuple(keys)
