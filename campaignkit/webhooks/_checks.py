"""What a delivery must satisfy before any of it reaches storage or a log.

Ids (session, conversation, phone, event) are at most :data:`MAX_ID_LENGTH`
printable characters (no control character, C0 or C1, no line or paragraph
separator, no invisible format character such as a bidi override: each could
forge or hide a log line); session variable names likewise; their values,
and the user's answer (``actual_response``), at most :data:`MAX_VALUE_LENGTH`
characters without a NUL (a PostgreSQL text cannot hold one). A delivery's
dedupe key is a digest of the whole body, so no raw id is ever stored.
"""

from __future__ import annotations

import hashlib

import orjson

from ._events import EventKind, WebhookEvent, closed_id_field

MAX_ID_LENGTH = 256
MAX_VALUE_LENGTH = 65_536

# Kinds that name a session: without a usable id they cannot be answered.
SESSION_KINDS = frozenset(EventKind) - {EventKind.TEMPLATE_STATUS, EventKind.UNKNOWN}


def problem_of(event: WebhookEvent) -> str | None:
    """The first field of ``event`` that may not be stored or logged (its
    path and why, never its value); None when all are fine."""
    for name in ("session_id", "country_code", "cellphone", "conversation_id", "event_id"):
        value = getattr(event, name)
        if value is not None and not loggable(value):
            return f"{name}: over {MAX_ID_LENGTH} characters or not printable"
    for index, item in enumerate(event.user_session_keys):
        path = f"user_session_keys[{index}]"
        if not loggable(item.key):
            return f"{path}.key: over {MAX_ID_LENGTH} characters or not printable"
        if len(item.value) > MAX_VALUE_LENGTH or "\x00" in item.value:
            return f"{path}.value: over {MAX_VALUE_LENGTH} characters or has a NUL"
    answer = event.answer  # what a ledger stores of a response
    if answer is not None and (len(answer) > MAX_VALUE_LENGTH or "\x00" in answer):
        return f"actual_response: over {MAX_VALUE_LENGTH} characters or has a NUL"
    if event.kind in SESSION_KINDS and not event.session_id:
        closed = event.kind is EventKind.CONVERSATION_CLOSED
        field = closed_id_field(event.payload) if closed else "session_id"
        return f"{field}: missing or empty"
    return None


def loggable(text: str) -> bool:
    """Whether ``text`` may stand as an id in storage and in a log line."""
    return len(text) <= MAX_ID_LENGTH and text.isprintable()


def delivery_key(event: WebhookEvent) -> str | None:
    """The dedupe key: ``event_id`` when given, else the whole body, as a digest
    (key order does not matter, every other byte does). None for a body nested
    deeper than orjson writes (255 levels; it reads 1,024): no real one is."""
    if event.event_id is not None:
        material = b"event_id:" + event.event_id.encode()
    else:
        try:
            material = orjson.dumps(event.payload, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            return None
    return f"{event.kind.value}:{hashlib.sha256(material).hexdigest()}"
