"""What a first-reply webhook delivered, read from its decoded JSON body
(deprecated: :func:`~campaignkit.webhooks.parse_event` reads every kind).

A real payload's id is its ``session_id`` (``session.external_id`` when the
conversation closed). Else the spec's ``session_external_id`` (a
non-empty string, or an integer) is looked for at the top level of the JSON
object first, then inside the objects found under the keys in
:data:`NESTING_KEYS`, breadth first, at most :data:`MAX_DEPTH` levels deep
(``{"data": {"session": {...}}}`` is found). ``user_session_keys`` is read from
the object where the id was found, else from the top level; it may be a list of
``{"key", "value"}`` objects or a ``{key: value}`` mapping (malformed entries
are skipped and logged).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, NoReturn

import attrs

from .._redaction import sdk_logger
from .._wire.convert import json_type
from ..errors import ValidationError
from ..models import SessionKey
from ._checks import MAX_ID_LENGTH, loggable, problem_of
from ._events import EventKind, parse_event, session_keys_of

logger = sdk_logger("campaignkit.webhooks")

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
KEYS_FIELD = "user_session_keys"


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


def extract_reply(payload: Any) -> ReplyEvent:
    """The :class:`ReplyEvent` of a decoded webhook payload (deprecated: use
    :func:`~campaignkit.webhooks.parse_event`).

    Raises :class:`~campaignkit.errors.ValidationError` (a ``ValueError``)
    naming the path of the id when no usable one is found.
    """
    warnings.warn(
        "extract_reply is deprecated: use campaignkit.webhooks.parse_event",
        DeprecationWarning,
        stacklevel=2,
    )
    return read_reply(payload)


def read_reply(payload: Any) -> ReplyEvent:
    """:func:`extract_reply` without its warning (the first-reply handler's)."""
    if not isinstance(payload, Mapping):
        _unusable("$", f"the body must be a JSON object, got {json_type(payload)}")
    event = parse_event(payload)
    problem = problem_of(event)
    if problem is not None:
        _unusable(*problem.split(": ", 1))
    if event.session_id is not None and event.kind is not EventKind.UNKNOWN:
        # A real payload: session_id, or session.external_id when closed.
        return ReplyEvent(event.session_id.strip() or _empty(), event.user_session_keys, payload)
    found = _find_id_holder(payload)
    if found is None:
        _unusable(ID_FIELD, "missing from the payload")
    path, holder = found
    raw_id = holder[ID_FIELD]
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        _unusable(path, f"must be a string, got {json_type(raw_id)}")
    session_id = str(raw_id).strip()
    if not session_id:
        _unusable(path, "is empty")
    if not loggable(session_id):
        _unusable(path, f"over {MAX_ID_LENGTH} characters or not printable")
    nested = holder.get(KEYS_FIELD) if holder is not payload else None
    keys = event.user_session_keys if nested is None else session_keys_of(nested)
    return ReplyEvent(session_id, keys, payload)


def _empty() -> NoReturn:
    _unusable("session_id", "is empty")


def _unusable(path: str, message: str) -> NoReturn:
    raise ValidationError([(path, message)])


def _find_id_holder(payload: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """The path of the id and the object holding it, searched breadth first."""
    level: list[tuple[str, Mapping[str, Any]]] = [("", payload)]
    for _ in range(MAX_DEPTH + 1):
        for prefix, node in level:
            if ID_FIELD in node:
                return prefix + ID_FIELD, node
        level = [
            (f"{prefix}{name}.", child)
            for prefix, node in level
            for name in NESTING_KEYS
            if isinstance(child := node.get(name), Mapping)
        ]
        if not level:
            break
    return None
