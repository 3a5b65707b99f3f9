"""Validation of the ``users`` array shared by both deploy endpoints."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "InvalidUsers",
    "SessionKeys",
    "UserIn",
    "network_cellphone",
    "parse_keys",
    "parse_users",
]

SessionKeys = tuple[tuple[str, str], ...]


class InvalidUsers(ValueError):
    """The body's ``users`` are missing or malformed; the text names the path."""


class UserIn(NamedTuple):
    country_code: str
    cellphone: str
    keys: SessionKeys
    eta: int | None


def network_cellphone(country_code: str, cellphone: str) -> str:
    """The cellphone as the network reports it back: WhatsApp still writes
    Mexican mobiles with the ``1`` that Mexico dropped in 2019."""
    if country_code == "+52" and len(cellphone) == 10:
        return "1" + cellphone
    return cellphone


def _text(value: object, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidUsers(f"{path} must be a non-empty string")
    return value


def parse_keys(value: object, path: str, names: dict[str, str] | None = None) -> SessionKeys:
    """``[{key, value}, ...]`` as pairs; ``names`` interns the key names."""
    if not isinstance(value, list):
        raise InvalidUsers(f"{path} must be an array of {{key, value}} objects")
    pairs = []
    for index, item in enumerate(value):
        where = f"{path}[{index}]"
        if not isinstance(item, dict):
            raise InvalidUsers(f"{where} must be an object with key and value")
        key, text = item.get("key"), item.get("value")
        if not isinstance(key, str) or not key:
            raise InvalidUsers(f"{where}.key must be a non-empty string")
        if not isinstance(text, str):
            raise InvalidUsers(f"{where}.value must be a string")
        pairs.append((key if names is None else names.setdefault(key, key), text))
    return tuple(pairs)


def parse_users(body: Any) -> list[UserIn]:
    """The users of a deploy body, or :class:`InvalidUsers` naming the first problem."""
    if not isinstance(body, dict):
        raise InvalidUsers("the body must be a JSON object with a users array")
    users = body.get("users")
    if not isinstance(users, list) or not users:
        raise InvalidUsers("users is required and must be a non-empty array")
    # Interning shares one string per distinct country code and key name
    # across 100k users.
    codes: dict[str, str] = {}
    names: dict[str, str] = {}
    parsed = []
    for index, user in enumerate(users):
        parsed.append(
            _well_formed_user(user, codes, names) or _checked_user(user, index, codes, names)
        )
    return parsed


def _well_formed_user(user: Any, codes: dict[str, str], names: dict[str, str]) -> UserIn | None:
    """The common case, checked inline; None sends the user to the checks that
    name the problem (building paths for 100k valid users costs more than the
    parse)."""
    if type(user) is not dict:
        return None
    code, cellphone = user.get("country_code"), user.get("cellphone")
    keys, eta = user.get("user_session_keys"), user.get("deployment_eta")
    if not (
        type(code) is str
        and code.startswith("+")
        and type(cellphone) is str
        and cellphone
        and type(keys) is list
        and (eta is None or type(eta) is int)
    ):
        return None
    pairs = []
    for item in keys:
        if type(item) is not dict:
            return None
        key, text = item.get("key"), item.get("value")
        if type(key) is not str or not key or type(text) is not str:
            return None
        pairs.append((names.setdefault(key, key), text))
    return UserIn(codes.setdefault(code, code), cellphone, tuple(pairs), eta)


def _checked_user(user: Any, index: int, codes: dict[str, str], names: dict[str, str]) -> UserIn:
    path = f"users[{index}]"
    if not isinstance(user, dict):
        raise InvalidUsers(f"{path} must be an object")
    code = _text(user.get("country_code"), f"{path}.country_code")
    if not code.startswith("+"):
        raise InvalidUsers(f"{path}.country_code must start with +")
    eta = user.get("deployment_eta")
    if eta is not None and (isinstance(eta, bool) or not isinstance(eta, int)):
        raise InvalidUsers(f"{path}.deployment_eta must be an integer UNIX timestamp")
    return UserIn(
        codes.setdefault(code, code),
        _text(user.get("cellphone"), f"{path}.cellphone"),
        parse_keys(user.get("user_session_keys"), f"{path}.user_session_keys", names),
        eta,
    )
