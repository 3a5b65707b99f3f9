"""A :class:`User` from what a caller hands a bulk send: a User, or a dict
shaped like the wire (also how the ledger keeps each recipient's user)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .models import SessionKey, User

_USER_FIELDS: Final = frozenset(
    {"cellphone", "country_code", "user_session_keys", "deployment_eta"}
)


def as_user(item: Any) -> tuple[User | None, str | None]:
    """A User from a User or a wire-shaped dict, or the reason it is not one."""
    if isinstance(item, User):
        return item, None
    if isinstance(item, Mapping):
        unknown = [str(name) for name in item if name not in _USER_FIELDS]
        if unknown:
            return None, f"unknown field(s): {', '.join(sorted(unknown))}"
        missing = [name for name in ("cellphone", "country_code") if name not in item]
        if missing:
            return None, f"missing field(s): {', '.join(missing)}"
        keys = item.get("user_session_keys", ())
        if isinstance(keys, list | tuple):
            converted: list[Any] = []
            for key in keys:
                if isinstance(key, Mapping):
                    if set(key) != {"key", "value"}:
                        return None, "each user_session_keys item needs exactly 'key' and 'value'"
                    key = SessionKey(key["key"], key["value"])
                converted.append(key)
            keys = converted
        user = User(
            cellphone=item["cellphone"],
            country_code=item["country_code"],
            user_session_keys=keys,
            deployment_eta=item.get("deployment_eta"),
        )
        return user, None
    return None, f"expected a User or a dict, got {type(item).__name__}"
