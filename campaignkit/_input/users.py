"""A :class:`User` from what a caller hands the SDK: a User, or a dict shaped
like the wire. Bulk sends, the ledger's records and the CLI's JSON files come
through :func:`as_user`, CSV rows through the :func:`build_user` it ends in,
so a user reads the same from each.

One rule for ``deployment_eta``: UNIX seconds (an int, or digits as text), an
aware datetime, or ISO 8601 text. A date-time without a UTC offset is refused
(by the validation, naming the field), never guessed as UTC or local time.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

import attrs

from .._words import listed
from ..models import SessionKey, User

_USER_FIELDS: Final = frozenset(
    {"cellphone", "country_code", "user_session_keys", "deployment_eta"}
)
RUN_FIELD: Final = "run"
"""What a run's export (``campaignkit runs RUN --export all``) adds to each
user it writes: that recipient's facts in the run (:data:`RUN_FACTS`). Read
back, it is left aside: a user is read as the run was given it."""
RUN_FACTS: Final = (
    "phone",
    "state",
    "launch",
    "status",
    "status_at",
    "delivered_at",
    "read_at",
    "replied_at",
    "opted_out_at",
    "error",
)
_READ_FIELDS: Final = _USER_FIELDS | {RUN_FIELD}


@attrs.frozen(kw_only=True)
class InvalidInput:
    """An input item that could not be read as a user: a bad row of a file.

    :func:`~campaignkit.users_from_csv` yields one for each row it cannot
    read (or, validating, that would be refused) instead of raising, so one
    bad row never stops a stream. ``send_bulk`` reports it as invalid, with
    its ``row`` and ``reason``; any other call given one (``send_campaign``,
    ``deploy_legacy``, a ledger's ``suppress``, ``unsuppress`` and
    ``suppressed``) refuses it before anything is sent, with a
    :class:`~campaignkit.errors.ValidationError` naming its place and this
    reason, e.g. ``users[3]: line 5: cellphone: is too short``.
    """

    reason: str
    """Why the row is not a user, starting with its line (``line 5: ...``)."""
    row: int | None = None
    """The 1-based line of the source file (the header is line 1)."""


def parse_time(text: str) -> int | datetime:
    """UNIX seconds from digits, else an ISO 8601 date or date-time as written
    (naive when it has no offset: the caller decides what that means)."""
    text = text.strip()
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"expected UNIX seconds or an ISO 8601 date-time, got {text!r}") from None


def as_user(item: Any) -> tuple[User | None, str | None]:
    """A User from a User or a wire-shaped dict, or the reason it is not one.

    Values are kept as given for the validation to report by path. A dict's
    ``run`` (:data:`RUN_FIELD`, written by a run's export) is left aside.
    """
    if isinstance(item, User):
        return item, None
    if not isinstance(item, Mapping):
        return None, f"expected a User or a dict, got {type(item).__name__}"
    if not _READ_FIELDS.issuperset(item):
        unknown = sorted(str(name) for name in item if name not in _READ_FIELDS)
        return None, f"unknown {listed('field', unknown)}"
    missing = [name for name in ("cellphone", "country_code") if name not in item]
    if missing:
        return None, f"missing {listed('field', missing)}"
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
    return build_user(item["cellphone"], item["country_code"], keys, item.get("deployment_eta"))


def build_user(
    cellphone: Any, country_code: Any, user_session_keys: Any, deployment_eta: Any
) -> tuple[User | None, str | None]:
    """A User from its fields, a text ETA parsed (empty text: none), or the
    reason it is not one; what :func:`as_user` and a CSV row build on."""
    if isinstance(deployment_eta, str):
        try:
            deployment_eta = parse_time(deployment_eta) if deployment_eta.strip() else None
        except ValueError as exc:
            return None, f"deployment_eta: {exc}"
    user = User(
        cellphone=cellphone,
        country_code=country_code,
        user_session_keys=user_session_keys,
        deployment_eta=deployment_eta,
    )
    return user, None
