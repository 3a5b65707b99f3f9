"""A campaign's users as the send body: every user checked before anything
is sent, the body built without a dict per user where the users allow it.

Rows 5 (build a 1,000-user send body) and 6 (send_bulk's planner, a user at a
time) of issue 21. :func:`validation.user_wire` checks every field in general
terms (patterns, UTF-8 encodability, a path for each problem) and gives the
reference result; the two roads here give exactly that result, or hand the
user to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

import attrs
import msgspec
import orjson

from .._input.phones import COUNTRIES_AS_ON_THE_WIRE, country
from .._input.validation import (
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
# them, and msgspec reading the attributes (from_attributes) costs ~20 ns an
# attribute against ~7 ns for a list comprehension, which CPython specialises
# for slotted classes. So the users' fields are read into columns by
# comprehensions, checked a column at a time in C, and written by msgspec from
# GC-free records built positionally in C. The checks: exact User and
# SessionKey types (msgspec would write any object), lengths, text and integer
# ranges in one `msgspec.convert` over the columns (the session key names on
# their distinct values: a campaign's users share them), the cellphones' ASCII
# digits in one joined string, the distinct country codes' form, no
# deployment_squad (its value has a form of its own); msgspec's writer refuses
# a lone surrogate, so what it writes is UTF-8. Anything else (a cellphone
# with separators, a datetime ETA, any problem) makes the whole call go user
# by user, where the problems are named.


class _WireKey(msgspec.Struct, omit_defaults=True, gc=False):
    key: str
    value: str
    type: str | None = None


class _WireUser(msgspec.Struct, omit_defaults=True, gc=False):
    cellphone: str
    country_code: str
    user_session_keys: tuple[_WireKey, ...]
    deployment_eta: int | None = None


_CHECKED_COLUMNS = tuple[
    list[str],  # cellphones
    list[Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_SESSION_KEY_LENGTH)]],
    list[Annotated[str, msgspec.Meta(max_length=MAX_SESSION_VALUE_LENGTH)]],
    list[Annotated[str, msgspec.Meta(min_length=1)] | None],  # session key types
    list[Annotated[int, msgspec.Meta(ge=0, le=MAX_UNIX_SECONDS)] | None],  # ETAs
]
_KEYS_OF = list[tuple[_WireKey, ...]]
_ENCODE: Callable[[Any], bytes] = msgspec.json.Encoder().encode


def users_json(users: tuple[Any, ...]) -> bytes | None:
    """``users`` as the JSON array of their wire form, or None when one may
    not be the common user (the caller then goes user by user)."""
    checked = _common_users(users)
    return None if checked is None else checked.json


@attrs.frozen
class WiredUsers:
    """Common users as :func:`user_wire_at` gives each, their fields as columns."""

    country_codes: list[str]
    cellphones: list[str]
    wires: list[str]
    """Each user's wire JSON, what ``orjson.dumps(user_wire_at(...))`` writes."""


def users_wired(users: Sequence[Any]) -> WiredUsers | None:
    """Each user's wire form (send_bulk's planner, a batch of users at a
    time: row 17), or None when one may not be the common user."""
    checked = _common_users(users)
    if checked is None:
        return None
    # One encoding of them all, cut back into users: each user's object opens
    # with its first field, `{"cellphone":`, which no string written inside it
    # can hold (a quote there is written `\"`, never after a brace).
    head = '{"cellphone":'
    first, *rest = checked.json.decode()[1:-1].split("," + head)
    return WiredUsers(checked.country_codes, checked.cellphones, [first, *map(head.__add__, rest)])


@attrs.frozen
class _Checked:
    country_codes: list[str]
    cellphones: list[str]
    json: bytes
    """The JSON array of the users' wire form."""


def _common_users(users: Sequence[Any]) -> _Checked | None:
    """``users`` checked a column at a time and written, or None when one
    may not be the common user."""
    try:
        # Exact types counted rather than collected in a set: ~30% less (row 5).
        if not users or [*map(type, users)].count(User) != len(users):
            return None
        keys_of = [user.user_session_keys for user in users]
        # As User's converter leaves them, or changed behind its back (then
        # possibly an iterator, which the user-by-user road would find consumed).
        if [*map(type, keys_of)].count(tuple) != len(keys_of):
            return None
        counts = [*map(len, keys_of)]
        items: list[Any] = []
        for keys in keys_of:  # extend() copies a tuple at once: half chain's cost (row 5)
            items.extend(keys)
        if [*map(type, items)].count(SessionKey) != len(items):
            return None
        cellphones = [user.cellphone for user in users]
        country_codes = [user.country_code for user in users]
        etas = [user.deployment_eta for user in users]
        names = [item.key for item in items]
        values = [item.value for item in items]
        kinds = [item.type for item in items]
        distinct_names = {*names}
        # Types and ETAs are mostly all None: checked only when one is set.
        msgspec.convert(
            (
                cellphones,
                [*distinct_names],
                values,
                kinds if kinds.count(None) < len(kinds) else [],
                etas if etas.count(None) < len(etas) else [],
            ),
            _CHECKED_COLUMNS,
        )
        if (
            not "".join(cellphones).encode("ascii").isdigit()
            or DEPLOYMENT_SQUAD in distinct_names
            or not _own_national_numbers(country_codes, cellphones)
        ):
            return None
        wire_keys = _wire_keys_of(keys_of, counts, (names, values, kinds))
        records = [*map(_WireUser, cellphones, country_codes, wire_keys, etas)]
        return _Checked(country_codes, cellphones, _ENCODE(records))
    except (TypeError, ValueError):
        # msgspec.ValidationError is a ValueError, and so are the
        # UnicodeEncodeErrors of a non-ASCII cellphone and of a lone surrogate.
        return None


def _own_national_numbers(country_codes: list[str], cellphones: list[str]) -> bool:
    """Whether every cellphone is what reading it into a Phone under its
    country code, written as the wire writes it, leaves as it is."""
    codes = {*country_codes}
    if len(codes) == 1:
        place = country(codes.pop())
        return (
            place is not None
            and place.code == country_codes[0]
            and all(map(place.read_as_is, cellphones))
        )
    places = {code: country(code) for code in codes}
    return all(
        (place := places[code]) is not None and place.code == code and place.read_as_is(cellphone)
        for code, cellphone in zip(country_codes, cellphones, strict=True)
    )


def _wire_keys_of(
    keys_of: list[tuple[SessionKey, ...]],
    counts: list[int],
    columns: tuple[list[str], list[str], list[str | None]],
) -> list[tuple[_WireKey, ...]]:
    """Each user's session keys as records, from the checked columns of
    their names, values and types."""
    if counts.count(counts[0]) == len(counts):
        # A campaign's users usually carry the same variables: the records are
        # made from the columns and cut back per user by zip, in C.
        if not counts[0]:
            return [()] * len(counts)
        return [*zip(*[iter(map(_WireKey, *columns))] * counts[0], strict=True)]
    # Cutting a column by uneven counts costs more (~110 ns a user by islice)
    # than msgspec reading the keys again, grouped as they are.
    return msgspec.convert(keys_of, _KEYS_OF, from_attributes=True)


# -- a user at a time: send_bulk's planner (row 6) ----------------------------------
# The common user is checked in a few exact-type, ASCII and length tests, about
# a third of user_wire's cost: a User without deployment_eta, its cellphone 4
# to 15 ASCII digits, its country code one user_wire found valid before, its
# session keys SessionKeys of ASCII text within the limits, untyped and none
# deployment_squad. ASCII text is always UTF-8 encodable. Any other user goes
# to user_wire, which builds the same wire form or names each problem; the
# path is only built then.


def user_wire_at(user: Any, index: int, problems: Problems) -> dict[str, Any] | None:
    """What ``user_wire(user, f"users[{index}]", problems)`` gives."""
    if type(user) is User and user.deployment_eta is None:
        cellphone, country_code, items = user.cellphone, user.country_code, user.user_session_keys
        if (
            type(country_code) is str
            and type(cellphone) is str
            # A country user_wire read before, the cellphone what reading leaves as it is.
            and (place := COUNTRIES_AS_ON_THE_WIRE.get(country_code)) is not None
            and place.read_as_is(cellphone)
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
    return user_wire(user, f"users[{index}]", problems)
