"""Validation of user input into wire values, before anything is sent.

Each function appends ``(path, message)`` problems to a list instead of
raising, so one :class:`ValidationError` reports every problem of a call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

from .._words import article
from ..errors import ValidationError
from ..models import DEPLOYMENT_SQUAD, DEPLOYMENT_SQUAD_PREFIX, SessionKey, User, session_keys
from .phones import (
    NOT_DIGITS,
    Phone,
    cellphone_digits,
    country,
    country_code_hint,
    identity,
    read_phone,
    read_text,
)
from .users import InvalidInput, as_user

Problems = list[tuple[str, str]]

SESSION_PAGE_LIMIT = range(1, 10_001)
# The service publishes no limit on session variables: these are ours, so
# that an oversized value is refused here, naming it, not by a gateway.
MAX_SESSION_KEY_LENGTH = 128
MAX_SESSION_VALUE_LENGTH = 4096
# Written as a JSON integer: orjson refuses more than 64 bits (a TypeError,
# not a problem named), and a signed 64-bit integer is what servers read.
MAX_UNIX_SECONDS = 2**63 - 1
COUNTRY_CODE = re.compile(r"\+[0-9]{1,4}")
_SQUAD = re.compile(rf"{DEPLOYMENT_SQUAD_PREFIX}[0-9]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Unreserved characters only (RFC 3986), not all dots: never "", "." or "..".
_SAFE_SEGMENT = re.compile(r"(?!\.*\Z)[A-Za-z0-9._~-]+")


def is_text(value: object) -> bool:
    """A ``str`` that can go on the wire (UTF-8 encodable: no lone surrogates)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def given(value: object, *, shown: bool = True) -> str:
    """What was given, in words: ``a float (1.5)``, ``a str ('57')``,
    ``None``, ``a list``; the value itself only when ``shown``."""
    if value is None:
        return "None"
    kind = type(value).__name__
    short = isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 40)
    if shown and short:
        return f"{article(kind)} {kind} ({value!r})"
    return f"{article(kind)} {kind}"


def _text_problem(value: object) -> str | None:
    """Why ``value`` cannot go on the wire as text, or None if it can."""
    if not isinstance(value, str):
        return f"must be text (a str), but {given(value)} was given"
    if not is_text(value):
        at = next(i for i, char in enumerate(value) if "\ud800" <= char <= "\udfff")
        return (
            "must be text that UTF-8 can encode, but it holds a lone surrogate "
            f"{value[at]!r} at position {at}"
        )
    return None


def raise_problems(problems: Problems) -> None:
    if problems:
        raise ValidationError(problems)


def user_wire(user: Any, path: str, problems: Problems) -> dict[str, Any] | None:
    """The wire form of one user, or None (with problems added) if invalid."""
    if not isinstance(user, User):
        _not_a_user(user, path, problems, f"a User, but {given(user)} was given")
        return None
    before = len(problems)
    country_code = user.country_code
    cellphone = user.cellphone
    place = None
    if not (isinstance(country_code, str) and COUNTRY_CODE.fullmatch(country_code)):
        problems.append(
            (
                f"{path}.country_code",
                "must be '+' and 1 to 4 digits, "
                f"but {given(country_code)} was given" + country_code_hint(country_code),
            )
        )
    elif (place := country(country_code)) is None:
        problems.append((f"{path}.country_code", f"{country_code!r} is no country's code"))
    if not isinstance(cellphone, str):
        problems.append((f"{path}.cellphone", _cellphone_problem(cellphone)))
    elif place is None:
        if cellphone_digits(cellphone) is None:
            problems.append((f"{path}.cellphone", NOT_DIGITS))
    else:
        phone = read_phone(country_code, cellphone)
        if isinstance(phone, str):
            problems.append((f"{path}.cellphone", phone))
        else:
            country_code, cellphone = phone.country_code, phone.cellphone
    keys = session_keys_wire(user.user_session_keys, f"{path}.user_session_keys", problems)
    wire: dict[str, Any] = {
        "cellphone": cellphone,
        "country_code": country_code,
        "user_session_keys": keys,
    }
    if user.deployment_eta is not None:
        wire["deployment_eta"] = unix_seconds(
            user.deployment_eta, f"{path}.deployment_eta", problems
        )
    return wire if len(problems) == before else None


def ledger_phone(value: Any, path: str, problems: Problems) -> str | None:
    """The key of a phone, as the ledger files its people
    (:attr:`Phone.key`), or None (with a problem added).

    From a :class:`Phone`, from a user (or a wire-shaped dict), read as a
    bulk send reads it, or from the text of a whole number.
    """
    if isinstance(value, Phone):
        return value.key
    if isinstance(value, str):
        phone = read_text(value)
        if isinstance(phone, str):
            problems.append((path, phone))
            return None
        return phone.key
    user, reason = as_user(value)
    if user is None:
        _not_a_user(value, path, problems, f"a phone number (text) or a user: {reason}")
        return None
    wire = user_wire(user, path, problems)
    return None if wire is None else identity(wire["country_code"], wire["cellphone"])


def _not_a_user(item: Any, path: str, problems: Problems, must_be: str) -> None:
    """The problem of an item given where a user goes: an unread row's own
    reason (:class:`InvalidInput`: its line and why), else what it ``must_be``."""
    if isinstance(item, InvalidInput):
        problems.append((path, item.reason))
    else:
        problems.append((path, f"must be {must_be}"))


def _cellphone_problem(cellphone: object) -> str:
    # The value is not repeated: a phone number is personal data.
    return (
        "must be text (a str of digits, e.g. '3001234567'), "
        f"but {given(cellphone, shown=False)} was given"
    )


def session_keys_wire(keys: Any, path: str, problems: Problems) -> list[dict[str, str]]:
    """The wire form of session variables (a mapping or SessionKey items)."""
    if not isinstance(keys, tuple):
        if isinstance(keys, Mapping) or (
            isinstance(keys, Iterable) and not isinstance(keys, str | bytes)
        ):
            keys = session_keys(keys)
        else:
            problems.append(
                (path, f"must be a mapping or a list of SessionKey, but {given(keys)} was given")
            )
            return []
    wire: list[dict[str, str]] = []
    for item in keys:
        _session_key_problems(item, f"{path}[{len(wire)}]", problems)
        entry = {"key": getattr(item, "key", None), "value": getattr(item, "value", None)}
        if getattr(item, "type", None) is not None:
            entry["type"] = item.type
        wire.append(entry)  # type: ignore[arg-type]
    return wire


def _session_key_problems(item: Any, path: str, problems: Problems) -> None:
    if not isinstance(item, SessionKey):
        problems.append((path, f"must be a SessionKey, but {given(item)} was given"))
        return
    key_problem = _text_problem(item.key)
    if key_problem is None and not item.key:
        key_problem = "must not be empty (it names the session variable)"
    elif key_problem is None and len(item.key) > MAX_SESSION_KEY_LENGTH:
        key_problem = (
            f"must be at most {MAX_SESSION_KEY_LENGTH} characters, but it has {len(item.key)}"
        )
    if key_problem is not None:
        problems.append((f"{path}.key", key_problem))
    value_problem = _text_problem(item.value)
    if value_problem is None and len(item.value) > MAX_SESSION_VALUE_LENGTH:
        value_problem = (
            f"must be at most {MAX_SESSION_VALUE_LENGTH} characters, but it has {len(item.value)}"
        )
    if value_problem is not None:
        name = f" (session variable {item.key!r})" if key_problem is None else ""
        problems.append((f"{path}.value", value_problem + name))
    elif item.key == DEPLOYMENT_SQUAD and not _SQUAD.fullmatch(item.value):
        problems.append((f"{path}.value", "deployment_squad must be DS_<cellphone>"))
    if item.type is not None:
        type_problem = _text_problem(item.type) or (None if item.type else "must not be empty")
        if type_problem is not None:
            problems.append((f"{path}.type", f"{type_problem} (None: no type)"))


def unix_seconds(value: Any, path: str, problems: Problems) -> int:
    """UNIX seconds from an int or an aware datetime; naive datetimes refused."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            problems.append((path, "datetime must be timezone-aware"))
            return 0
        return int(value.timestamp())
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_UNIX_SECONDS:
        return value
    problems.append(
        (
            path,
            "must be UNIX seconds (an int from 0 to 2**63 - 1) or an aware datetime, "
            f"but {given(value)} was given",
        )
    )
    return 0


def users_tuple(users: Any, problems: Problems) -> tuple[Any, ...]:
    """``users`` read once into a tuple (empty, with a problem, if it is not a
    non-empty iterable of users: a string or a mapping is refused, not iterated)."""
    if isinstance(users, str | bytes | Mapping) or not isinstance(users, Iterable):
        problems.append(("users", f"must be an iterable of User, but {given(users)} was given"))
        return ()
    items = tuple(users)
    if not items:
        problems.append(("users", "at least one user is required"))
    return items


def path_segment(name: str, value: Any, problems: Problems) -> str:
    """``value`` percent-encoded as exactly one path segment.

    Refuses what could still change the request's target once encoded: empty
    values, ``.`` and ``..``, and control characters.
    """
    # The hot path (benchmarks row 3): an id such as ``L1``, or an int, is its
    # own encoding and passes every check of ``encoded_segment``, so it is
    # returned at once (~4,000 instructions a call less than those checks and
    # ``quote``).
    if type(value) is str and _SAFE_SEGMENT.fullmatch(value):
        return value
    if type(value) is int:
        return str(value)
    return encoded_segment(name, value, problems)


def encoded_segment(name: str, value: Any, problems: Problems) -> str:
    """:func:`path_segment` without its shortcut for ids that need no encoding."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        problems.append((name, f"must be a str or an int, but {given(value)} was given"))
        return ""
    if value in ("", ".", ".."):
        problem = f"must not be {value!r}"
    elif _CONTROL.search(value):
        problem = "must not contain control characters"
    elif not is_text(value):
        problem = "must be UTF-8 encodable (no lone surrogates)"
    else:
        return quote(value, safe="")
    problems.append((name, problem))
    return ""


def page_limit(name: str, value: Any, problems: Problems) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value not in SESSION_PAGE_LIMIT:
        problems.append((name, f"must be an int from 1 to 10000, but {given(value)} was given"))
