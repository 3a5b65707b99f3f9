"""The answers of the endpoints: errors as ``{"error": <code>, "message":
<text>}``, and the webhook's ``200`` with the keys ``on_event`` returned.

An :class:`Answer` is a status and a JSON body, the same for every framework;
each mount turns it into its own response.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import orjson
from aiohttp import web

from ..models import SessionKey


@attrs.frozen
class Answer:
    """What the receiver answers: ``status`` and a JSON ``body``."""

    status: int
    body: bytes


def refusal(status: int, code: str, message: str) -> Answer:
    return Answer(status, orjson.dumps({"error": code, "message": message}))


def error_answer(status: int, code: str, message: str) -> web.Response:
    """:func:`refusal` as an aiohttp response."""
    return aiohttp_response(refusal(status, code, message))


def aiohttp_response(answer: Answer) -> web.Response:
    return web.Response(status=answer.status, body=answer.body, content_type="application/json")


def _wire(keys: Iterable[SessionKey]) -> list[dict[str, str]]:
    return [
        {"key": k.key, "value": k.value, **({"type": k.type} if k.type is not None else {})}
        for k in keys
    ]


def as_keys(result: Any) -> tuple[SessionKey, ...]:
    """The keys ``on_event`` returned; ``TypeError`` naming what is wrong."""
    if result is None:
        return ()
    items = [SessionKey(k, v) for k, v in result.items()] if isinstance(result, Mapping) else result
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise TypeError(f"on_event returned {type(result).__name__}, not keys")
    keys = tuple(items)
    for item in keys:
        if not (
            isinstance(item, SessionKey)
            and isinstance(item.key, str)
            and isinstance(item.value, str)
            and isinstance(item.type, str | None)
        ):
            raise TypeError("on_event returned an item that is not a SessionKey of text")
    return keys


def keys_answer(keys: Iterable[SessionKey]) -> Answer:
    """The ``200`` the service reads: ``{"user_session_keys": [...]}``."""
    return Answer(200, orjson.dumps({"user_session_keys": _wire(keys)}))
