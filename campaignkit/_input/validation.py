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

from ..errors import ValidationError
from ..models import DEPLOYMENT_SQUAD, DEPLOYMENT_SQUAD_PREFIX, SessionKey, User, session_keys

Problems = list[tuple[str, str]]

SESSION_PAGE_LIMIT = range(1, 10_001)
_COUNTRY_CODE = re.compile(r"\+[0-9]{1,4}")
_CELLPHONE_SEPARATORS = re.compile(r"[ \-()]")
_CELLPHONE = re.compile(r"[0-9]{4,15}")
_SQUAD = re.compile(rf"{DEPLOYMENT_SQUAD_PREFIX}[0-9]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_text(value: object) -> bool:
    """A ``str`` that can go on the wire (UTF-8 encodable: no lone surrogates)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def raise_problems(problems: Problems) -> None:
    if problems:
        raise ValidationError(problems)


def user_wire(user: Any, path: str, problems: Problems) -> dict[str, Any] | None:
    """The wire form of one user, or None (with problems added) if invalid."""
    if not isinstance(user, User):
        problems.append((path, f"expected a User, got {type(user).__name__}"))
        return None
    before = len(problems)
    country_code = user.country_code
    if not (type(country_code) is str and country_code in _VALID_COUNTRY_CODES):
        if isinstance(country_code, str) and _COUNTRY_CODE.fullmatch(country_code):
            _VALID_COUNTRY_CODES.add(country_code)
        else:
            problems.append(
                (f"{path}.country_code", f"must be '+' and 1 to 4 digits, got {country_code!r}")
            )
    cellphone = user.cellphone
    if isinstance(cellphone, str) and not (cellphone.isascii() and cellphone.isdigit()):
        cellphone = _CELLPHONE_SEPARATORS.sub("", cellphone)
    if not (isinstance(cellphone, str) and _CELLPHONE.fullmatch(cellphone)):
        problems.append((f"{path}.cellphone", _cellphone_problem(user.cellphone)))
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


# Valid country codes seen so far: a campaign has few distinct ones, and a set
# lookup is cheaper than the pattern. There are at most 10**1 + ... + 10**4.
_VALID_COUNTRY_CODES: set[str] = set()


def _cellphone_problem(cellphone: object) -> str:
    if not isinstance(cellphone, str):
        return f"must be a string, got {type(cellphone).__name__}"
    return (
        "must be 4 to 15 digits without the country code (spaces, dashes and "
        "parentheses are allowed)"
    )


def session_keys_wire(keys: Any, path: str, problems: Problems) -> list[dict[str, str]]:
    """The wire form of session variables (a mapping or SessionKey items)."""
    if not isinstance(keys, tuple):
        if isinstance(keys, Mapping) or (
            isinstance(keys, Iterable) and not isinstance(keys, str | bytes)
        ):
            keys = session_keys(keys)
        else:
            problems.append((path, f"expected session keys, got {type(keys).__name__}"))
            return []
    wire: list[dict[str, str]] = []
    for item in keys:
        # The common case, checked inline: ASCII text is always UTF-8 encodable,
        # so only other text (and deployment_squad) needs the full checks.
        if type(item) is SessionKey:
            key, value = item.key, item.value
            if (
                type(key) is str
                and type(value) is str
                and key
                and key.isascii()
                and value.isascii()
                and key != DEPLOYMENT_SQUAD
                and item.type is None
            ):
                wire.append({"key": key, "value": value})
                continue
        _session_key_problems(item, f"{path}[{len(wire)}]", problems)
        entry = {"key": getattr(item, "key", None), "value": getattr(item, "value", None)}
        if getattr(item, "type", None) is not None:
            entry["type"] = item.type
        wire.append(entry)  # type: ignore[arg-type]
    return wire


def _session_key_problems(item: Any, path: str, problems: Problems) -> None:
    if not isinstance(item, SessionKey):
        problems.append((path, f"expected a SessionKey, got {type(item).__name__}"))
        return
    if not is_text(item.key) or not item.key:
        problems.append((f"{path}.key", "must be a non-empty UTF-8 string"))
    if not is_text(item.value):
        problems.append(
            (f"{path}.value", f"must be a UTF-8 string, got {type(item.value).__name__}")
        )
    elif item.key == DEPLOYMENT_SQUAD and not _SQUAD.fullmatch(item.value):
        problems.append((f"{path}.value", "deployment_squad must be DS_<cellphone>"))
    if item.type is not None and (not is_text(item.type) or not item.type):
        problems.append((f"{path}.type", "must be None or a non-empty UTF-8 string"))


def unix_seconds(value: Any, path: str, problems: Problems) -> int:
    """UNIX seconds from an int or an aware datetime; naive datetimes refused."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            problems.append((path, "datetime must be timezone-aware"))
            return 0
        return int(value.timestamp())
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    problems.append((path, f"must be UNIX seconds (int >= 0) or an aware datetime, got {value!r}"))
    return 0


def users_tuple(users: Any, problems: Problems) -> tuple[Any, ...]:
    """``users`` read once into a tuple (empty, with a problem, if it is not a
    non-empty iterable of users: a string or a mapping is refused, not iterated)."""
    if isinstance(users, str | bytes | Mapping) or not isinstance(users, Iterable):
        problems.append(("users", f"expected an iterable of User, got {type(users).__name__}"))
        return ()
    given = tuple(users)
    if not given:
        problems.append(("users", "at least one user is required"))
    return given


def users_wire(users: tuple[Any, ...], problems: Problems) -> list[dict[str, Any]]:
    """The wire list of users; problems are added with ``users[i]`` paths."""
    wire = []
    for index, user in enumerate(users):
        entry = user_wire(user, f"users[{index}]", problems)
        if entry is not None:
            wire.append(entry)
    return wire


def path_segment(name: str, value: Any, problems: Problems) -> str:
    """``value`` percent-encoded as exactly one path segment.

    Refuses what could still change the request's target once encoded: empty
    values, ``.`` and ``..``, and control characters.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        problems.append((name, f"must be a string or an int, got {type(value).__name__}"))
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
        problems.append((name, f"must be an int from 1 to 10000, got {value!r}"))
