"""The answers of the endpoints: errors as ``{"error": <code>, "message":
<text>}``, and the webhook's ``200`` with the keys ``on_event`` returned."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from aiohttp import web

from ..models import SessionKey


def error_answer(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)


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


def keys_answer(keys: Iterable[SessionKey]) -> web.Response:
    """The ``200`` the service reads: ``{"user_session_keys": [...]}``."""
    return web.Response(
        body=orjson.dumps({"user_session_keys": _wire(keys)}), content_type="application/json"
    )
