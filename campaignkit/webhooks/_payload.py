"""What a first-reply webhook delivered, read from its decoded JSON body.

The spec does not publish the payload's shape; it only says the call carries
``session_external_id`` and may deliver ``user_session_keys``. The id (a
non-empty string, or an integer) is looked for at the top level of the JSON
object first, then inside the objects found under the keys in
:data:`NESTING_KEYS`, breadth first, at most :data:`MAX_DEPTH` levels deep
(``{"data": {"session": {...}}}`` is found). ``user_session_keys`` is read from
the object where the id was found, else from the top level; it may be a list of
``{"key", "value"}`` objects or a ``{key: value}`` mapping (malformed entries
are skipped and logged).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

import attrs
import orjson

from .._redaction import sdk_logger
from ..errors import ValidationError
from ..models import SessionKey

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
    """The :class:`ReplyEvent` of a decoded webhook payload.

    Raises :class:`~campaignkit.errors.ValidationError` (a ``ValueError``)
    naming the path of the id when no usable one is found.
    """
    if not isinstance(payload, Mapping):
        _unusable("$", f"the body must be a JSON object, got {type(payload).__name__}")
    found = _find_id_holder(payload)
    if found is None:
        _unusable(ID_FIELD, "missing from the payload")
    path, holder = found
    raw_id = holder[ID_FIELD]
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
        _unusable(path, f"must be a string, got {type(raw_id).__name__}")
    session_id = str(raw_id).strip()
    if not session_id:
        _unusable(path, "is empty")
    raw_keys = holder.get(KEYS_FIELD, payload.get(KEYS_FIELD))
    return ReplyEvent(session_id, _session_keys(raw_keys), payload)


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
            text = value if isinstance(value, str) else orjson.dumps(value).decode()
            keys.append(SessionKey(key, text))
        else:
            logger.warning("webhook: skipped session variable %r=%r", key, value)
    return tuple(keys)
