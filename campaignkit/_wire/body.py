"""A campaign's users as the send body: every user checked before anything
is sent, the body built without a dict per user where the users allow it.

Rows 5 (build a 1,000-user send body) and 6 (send_bulk's planner, a user at a
time) of issue 21. :func:`validation.user_wire` checks every field in general
terms (patterns, UTF-8 encodability, a path for each problem) and gives the
reference result; the two roads here give exactly that result, or hand the
user to it.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import Annotated, Any

import msgspec
import orjson

from .._input.validation import (
    COUNTRY_CODE,
    MAX_SESSION_KEY_LENGTH,
    MAX_SESSION_VALUE_LENGTH,
    MAX_UNIX_SECONDS,
    Problems,
    user_wire,
)
from ..models import DEPLOYMENT_SQUAD, SessionKey, User

UsersWire = list[dict[str, Any]] | orjson.Fragment
"""The ``users`` of a send body, for ``orjson.dumps``: the wire dicts, or the
JSON array already written."""


def users_wire(users: tuple[Any, ...], problems: Problems) -> UsersWire:
    """The wire list of users, problems added with ``users[i]`` paths."""
    written = users_json(users)
    if written is not None:
        return orjson.Fragment(written)
    wire: list[dict[str, Any]] = []
    for index, user in enumerate(users):
        entry = user_wire_at(user, index, problems)
        if entry is not None:
            wire.append(entry)
    return wire


# -- a whole body at once: send_campaign (row 5) --------------------------------
# Building a dict per user and per session key cost more than orjson writing
# them. msgspec reads the users' attributes into GC-free records in C, checking
# types and lengths as it goes, and writes them as JSON: none of it touches a
# Python dict. What msgspec cannot say is checked on whole columns: exact types
# (it would read any object with these attributes), the cellphone's ASCII
# digits, the distinct country codes' form, no deployment_squad (its value has
# a form of its own), UTF-8 (msgspec refuses a lone surrogate). Anything else
# (a cellphone with separators, a datetime ETA, any problem) makes the whole
# call go user by user, where the problems are named.


class _WireKey(msgspec.Struct, omit_defaults=True, gc=False):
    key: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_SESSION_KEY_LENGTH)]
    value: Annotated[str, msgspec.Meta(max_length=MAX_SESSION_VALUE_LENGTH)]
    type: Annotated[str, msgspec.Meta(min_length=1)] | None = None


class _WireUser(msgspec.Struct, omit_defaults=True, gc=False):
    cellphone: Annotated[str, msgspec.Meta(min_length=4, max_length=15)]
    country_code: str
    user_session_keys: tuple[_WireKey, ...]
    deployment_eta: Annotated[int, msgspec.Meta(ge=0, le=MAX_UNIX_SECONDS)] | None = None


_WIRE_USERS = tuple[_WireUser, ...]
_ENCODE: Callable[[Any], bytes] = msgspec.json.Encoder().encode
# A key's name is written only as this; in a string a quote is escaped.
_SQUAD_WRITTEN = orjson.dumps({"key": DEPLOYMENT_SQUAD})[1:-1]


def users_json(users: tuple[Any, ...]) -> bytes | None:
    """``users`` as the JSON array of their wire form, or None when one may
    not be the common user (the caller then goes user by user)."""
    try:
        if {*map(type, users)} != {User}:
            return None
        items = chain.from_iterable([user.user_session_keys for user in users])
        if not {*map(type, items)} <= {SessionKey}:
            return None
        records = msgspec.convert(users, _WIRE_USERS, from_attributes=True)
        digits = "".join([record.cellphone for record in records])
        if not (digits.isascii() and digits.isdigit()):
            return None
        if not all(map(COUNTRY_CODE.fullmatch, {record.country_code for record in records})):
            return None
        written = _ENCODE(records)
    except (TypeError, ValueError):
        # msgspec.ValidationError is a ValueError, and so is the
        # UnicodeEncodeError of a lone surrogate.
        return None
    return None if _SQUAD_WRITTEN in written else written


# -- a user at a time: send_bulk's planner (row 6) ----------------------------------
# The common user is checked in a few exact-type, ASCII and length tests, about
# a third of user_wire's cost: a User without deployment_eta, its cellphone 4
# to 15 ASCII digits, its country code one user_wire found valid before, its
# session keys SessionKeys of ASCII text within the limits, untyped and none
# deployment_squad. ASCII text is always UTF-8 encodable. Any other user goes
# to user_wire, which builds the same wire form or names each problem; the
# path is only built then.

_VALID_COUNTRY_CODES: set[str] = set()  # a campaign has few; at most 11,110 exist


def user_wire_at(user: Any, index: int, problems: Problems) -> dict[str, Any] | None:
    """What ``user_wire(user, f"users[{index}]", problems)`` gives."""
    if type(user) is User and user.deployment_eta is None:
        cellphone, country_code, items = user.cellphone, user.country_code, user.user_session_keys
        if (
            type(cellphone) is str
            and cellphone.isascii()
            and cellphone.isdigit()
            and 4 <= len(cellphone) <= 15
            and type(country_code) is str
            and country_code in _VALID_COUNTRY_CODES
            and type(items) is tuple
        ):
            keys: list[dict[str, str]] = []
            for item in items:
                if type(item) is not SessionKey:
                    break
                key, value = item.key, item.value
                if not (
                    type(key) is str
                    and type(value) is str
                    and 0 < len(key) <= MAX_SESSION_KEY_LENGTH
                    and len(value) <= MAX_SESSION_VALUE_LENGTH
                    and key.isascii()
                    and value.isascii()
                    and key != DEPLOYMENT_SQUAD
                    and item.type is None
                ):
                    break
                keys.append({"key": key, "value": value})
            else:
                return {
                    "cellphone": cellphone,
                    "country_code": country_code,
                    "user_session_keys": keys,
                }
    entry = user_wire(user, f"users[{index}]", problems)
    if entry is not None:
        _VALID_COUNTRY_CODES.add(entry["country_code"])
    return entry
