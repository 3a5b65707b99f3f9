"""What the service POSTs to your server, read from the decoded JSON body.

The kinds and their fields are the service's published ones: flat events
carry ``session_id``, the conversation-closed event ``session.external_id``
(its HubSpot variant a flat ``external_id`` and ``closed_at``), the template
status event none. :func:`parse_event` tells them apart by their fields and
never raises for a JSON object: a shape it does not know is
:attr:`EventKind.UNKNOWN`, its payload kept. A field of the wrong JSON type
reads as absent.
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

__all__ = ["Condition", "EventKind", "Question", "TemplateStatus", "WebhookEvent", "parse_event"]

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
class Question:
    """The question an event is about: its ``type`` (e.g. ``"open"``,
    ``"closed"``), ``text``, and the ``answers`` offered (their texts)."""

    type: str | None = None
    text: str | None = None
    answers: tuple[str, ...] = ()


@attrs.frozen
class Condition:
    """What a condition node compared: the session variable ``variable``
    (its ``variable_value``) with ``operator`` (``EQ``, ``GT``, ``LT``,
    ``GTE``, ``LTE`` or ``NEQ``, as sent) and ``value``."""

    variable: str | None = None
    variable_value: str | None = None
    operator: str | None = None
    value: str | None = None


@attrs.frozen
class TemplateStatus:
    """A template (HSM) status event's fields: the template's ``name``, its
    ``status`` (``APPROVED``, ``REJECTED``, ``PAUSED``, ``DISABLED``,
    ``PENDING_DELETION``, as sent) and the ``affected_conversation_ids``."""

    name: str | None = None
    status: str | None = None
    affected_conversation_ids: tuple[str, ...] = ()


@attrs.frozen
class WebhookEvent:
    """One call of the service to your webhook.

    ``session_id`` is the id to give :meth:`CampaignClient.update_session`
    (None where the event has none); ``occurred_at`` an aware UTC datetime
    (None when absent or unreadable); ``payload`` the decoded body, as sent.
    ``question`` (response, delivered, read, opt-out, timeout),
    ``classified_answer`` (the text of the offered answer the service
    matched, beside :attr:`answer`, what the user wrote), ``condition`` and
    ``template`` are None where the event has none.
    """

    kind: EventKind
    session_id: str | None = None
    country_code: str | None = None
    cellphone: str | None = None
    conversation_id: str | None = None
    occurred_at: datetime | None = None
    user_session_keys: tuple[SessionKey, ...] = ()
    event_id: str | None = None
    question: Question | None = None
    classified_answer: str | None = None
    condition: Condition | None = None
    template: TemplateStatus | None = None
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
    user = _mapping(body.get("user"))
    if kind is EventKind.CONVERSATION_CLOSED:
        closed = _closed(body) or body
        session_id = _text(closed.get("external_id"))
        occurred = _time(closed.get("closed_at"))
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
        question=_question(body.get("question")) if kind in _ASKED else None,
        classified_answer=_text_of(body.get("classified_answer")),
        condition=_condition(body) if kind is EventKind.CONDITION else None,
        template=_template(body) if kind is EventKind.TEMPLATE_STATUS else None,
        payload=payload,
    )


def closed_id_field(payload: Any) -> str:
    """Where a conversation-closed body's session id is: ``session.external_id``,
    or ``external_id`` in the HubSpot variant."""
    return "external_id" if _closed(_mapping(payload)) is payload else "session.external_id"


def _closed(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object of a conversation-closed body holding its ``external_id``
    and ``closed_at``: ``session``, or the body itself in the HubSpot
    variant; None for any other body."""
    session = body.get("session")
    if isinstance(session, Mapping) and ("external_id" in session or "closed_at" in session):
        return session
    return body if "closed_at" in body else None


def _kind(body: Mapping[str, Any]) -> EventKind:
    if body.get("event_type") == "hsm.status":
        return EventKind.TEMPLATE_STATUS
    if _closed(body) is not None:
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


# Kinds whose body names the question of the flow they are about.
_ASKED = frozenset(
    {EventKind.RESPONSE, EventKind.DELIVERED, EventKind.READ, EventKind.OPT_OUT, EventKind.TIMEOUT}
)


def _question(value: Any) -> Question | None:
    if not isinstance(value, Mapping):
        return None
    answers = value.get("answers")
    offered = [_text_of(a) for a in answers] if type(answers) is list else []
    return Question(
        type=_string(value.get("type")),
        text=_string(value.get("text")),
        answers=tuple(text for text in offered if text is not None),
    )


def _condition(body: Mapping[str, Any]) -> Condition:
    variable, condition = _mapping(body.get("variable")), _mapping(body.get("condition"))
    return Condition(
        variable=_string(variable.get("name")),
        variable_value=_scalar(variable.get("value")),
        operator=_string(condition.get("operator")),
        value=_scalar(condition.get("value")),
    )


def _template(body: Mapping[str, Any]) -> TemplateStatus:
    ids = body.get("affected_conversation_ids")
    affected = [_text(i) for i in ids] if type(ids) is list else []
    return TemplateStatus(
        name=_string(body.get("name")),
        status=_string(body.get("status")),
        affected_conversation_ids=tuple(i for i in affected if i is not None),
    )


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text_of(value: Any) -> str | None:
    """The ``text`` of a ``{"text": ...}`` object (an answer, a classified answer)."""
    return _string(value.get("text")) if isinstance(value, Mapping) else None


def _scalar(value: Any) -> str | None:
    """A value as text: a string as it is, a number or boolean as its JSON;
    else None."""
    if type(value) is str:
        return value
    if isinstance(value, int | float):  # bool is an int
        return json.dumps(value)
    return None


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
    for key, raw_value, kind in items:
        value = _scalar(raw_value)
        if type(key) is not str or not key or value is None:
            continue
        keys.append(SessionKey(key, value, kind if type(kind) is str else None))
    if len(keys) < len(items):
        # Counted, never shown: the entries are the sender's raw text.
        logger.warning(
            "webhook: skipped %d malformed user_session_keys entries", len(items) - len(keys)
        )
    return tuple(keys)
