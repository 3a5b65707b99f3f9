"""The rules that protect the sending line (send window, daily limit,
sending lines): checked with a bulk send's options, stored with its run in
the ledger (so the workers read them), and applied to each request just
before it leaves, by the code ``send_bulk`` and the workers share."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias
from zoneinfo import ZoneInfo

import attrs
import orjson

from .._input.validation import Problems
from ..ledger import Claim, Ledger, Recipients
from ..models import DEPLOYMENT_SQUAD, DEPLOYMENT_SQUAD_PREFIX, SessionKey, User
from ._windows import (
    TZ_KEY,
    NoOpening,
    RecipientClock,
    SendWindow,
    deployment_eta,
    given_zone,
    zone_named,
)

TzFor: TypeAlias = Callable[[User], str | None]
"""What ``tz_for=`` takes: a user's IANA time zone name, or None for the number's."""

_LINE = re.compile(r"[1-9][0-9]{7,18}")


@attrs.frozen
class SendRules:
    """A run's rules; stored with the run as :meth:`options`."""

    window: SendWindow | None = None
    daily_limit: int | None = None
    lines: tuple[str, ...] = ()
    default_tz: str | None = None
    """The zone that times a number the window cannot be held for in its
    own zones (none known, or none shared): without it, it is deferred."""

    @property
    def rewrites(self) -> bool:
        """Whether requests are rewritten (an ETA or a line added)."""
        return self.window is not None or bool(self.lines)

    @property
    def clock(self) -> RecipientClock | None:
        """The send window with the zone it falls back on, if there is a window."""
        if self.window is None:
            return None
        default = None if self.default_tz is None else zone_named(self.default_tz)
        if self.default_tz is not None and default is None:
            # Checked when the run started: a worker whose zone database lacks it.
            raise NoOpening(f"default_tz {self.default_tz!r} is no time zone on this machine")
        return RecipientClock(self.window, default)

    def options(self) -> dict[str, Any]:
        return {
            "send_window": None if self.window is None else self.window.as_json(),
            "daily_limit": self.daily_limit,
            "lines": list(self.lines),
            "default_tz": self.default_tz,
        }

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SendRules:
        window = options.get("send_window")
        return cls(
            None if window is None else SendWindow.from_json(window),
            options.get("daily_limit"),
            tuple(options.get("lines") or ()),
            options.get("default_tz"),
        )


NO_RULES: Final = SendRules()


MAX_COUNT: Final = 2**63 - 1
"""The largest count a ledger stores (a signed 64-bit integer)."""


def count_problems(name: str, value: object, *, most: int = MAX_COUNT) -> Problems:
    """The problem of a count option unless it is an int from 1 to ``most``."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= most:
        return []
    # A huge int has no repr past 4300 digits, and says nothing more with one.
    if isinstance(value, int) and value.bit_length() > 64:
        shown = f"an int of {value.bit_length()} bits"
    else:
        shown = repr(value)
    return [(name, f"must be an int from 1 to {most}, got {shown}")]


def rules_problems(
    send_window: object,
    daily_limit: object,
    lines: object,
    tz_for: object,
    default_tz: object = None,
) -> tuple[SendRules, Problems]:
    """The rules from a bulk send's options, and every problem of them."""
    problems: Problems = []
    windowless = send_window is None
    if send_window is not None and not isinstance(send_window, SendWindow):
        problems.append(("send_window", f"must be a SendWindow or None, got {send_window!r}"))
        send_window = None
    if daily_limit is not None and (limit_problems := count_problems("daily_limit", daily_limit)):
        problems += limit_problems
        daily_limit = None
    numbers: tuple[str, ...] = ()
    if lines is not None:
        if isinstance(lines, str | bytes) or not isinstance(lines, Iterable):
            problems.append(("lines", f"must be a list of phone numbers, got {lines!r}"))
        else:
            numbers = tuple(lines)
            for i, line in enumerate(numbers):
                if not (isinstance(line, str) and _LINE.fullmatch(line)):
                    problems.append(
                        (
                            f"lines[{i}]",
                            "must be the sending number with its country code, digits "
                            f"only (e.g. '573001234567'), got {line!r}",
                        )
                    )
            if len(set(numbers)) != len(numbers):
                problems.append(("lines", "repeats a number"))
    if tz_for is not None and not callable(tz_for):
        problems.append(
            ("tz_for", f"must be a callable (User -> zone name) or None, got {tz_for!r}")
        )
    if default_tz is not None:
        if not isinstance(default_tz, str) or zone_named(default_tz) is None:
            problems.append(
                (
                    "default_tz",
                    f"must name a time zone (e.g. 'America/Bogota') or be None, got {default_tz!r}",
                )
            )
            default_tz = None
        elif windowless:
            problems.append(("default_tz", "times a send window: give send_window too"))
    assert send_window is None or isinstance(send_window, SendWindow)
    assert default_tz is None or isinstance(default_tz, str)
    daily = daily_limit if isinstance(daily_limit, int) else None
    return SendRules(send_window, daily, numbers, default_tz), problems


def zone_preparer(
    rules: SendRules, tz_for: TzFor | None
) -> Callable[[User], tuple[User | None, str | None]] | None:
    """What the planner does to each user before validating it: give it its
    ``tz`` session variable from ``tz_for`` (so the zone travels with the
    user, to the workers too), and refuse a ``tz`` that names no zone."""
    if rules.window is None:
        return None

    def prepare(user: User) -> tuple[User | None, str | None]:
        zone = None if tz_for is None else tz_for(user)
        keys = user.user_session_keys
        if zone is not None:
            others = tuple(k for k in keys if not (isinstance(k, SessionKey) and k.key == TZ_KEY))
            keys = (*others, SessionKey(TZ_KEY, zone))
            user = attrs.evolve(user, user_session_keys=keys)
        named = given_zone(tz_of(user))
        if named is not None and zone_named(named) is None:
            return None, f"{TZ_KEY}: {named!r} is not a time zone (e.g. 'America/Bogota')"
        return user, None

    return prepare


def zone_deferral(rules: SendRules) -> Callable[[str, User], str | None] | None:
    """What the planner asks of each recipient (its number as the service
    gets it, ``+`` country code and national number; its user) under a
    send window: why the window cannot be held for it (the detail it is
    deferred with), or None."""
    clock = rules.clock
    if clock is None:
        return None

    def deferral(phone: str, user: User) -> str | None:
        return clock.deferral(phone, tz_of(user), utc_now())

    return deferral


def tz_of(user: User) -> str | None:
    """The user's ``tz`` session variable, if it has one."""
    for key in user.user_session_keys:
        if isinstance(key, SessionKey) and key.key == TZ_KEY:
            return key.value
    return None


async def request_body(ledger: Ledger, claim: Claim, rules: SendRules, now: datetime) -> bytes:
    """The body of the request of ``claim``, with ``rules`` applied to each
    user: a ``deployment_squad`` for those without one (the line the ledger
    keeps for them), and a ``deployment_eta`` outside their send window."""
    recipients = Recipients.of(claim.recipients)
    if not rules.rewrites:
        return ('{"users":[' + ",".join(recipients.users) + "]}").encode()
    wires: list[dict[str, Any]] = [orjson.loads(user) for user in recipients.users]
    phones = recipients.phones
    if rules.lines:
        assigned = await ledger.assign_lines(lineless(phones, wires), rules.lines)
        for phone, wire in zip(phones, wires, strict=True):
            if phone in assigned:
                value = f"{DEPLOYMENT_SQUAD_PREFIX}{assigned[phone]}"
                wire["user_session_keys"].append({"key": DEPLOYMENT_SQUAD, "value": value})
    if (clock := rules.clock) is not None:
        # The users of a zone set without an ETA of their own share one.
        shared: dict[tuple[ZoneInfo, ...], int | None] = {}
        for wire in wires:
            number = wire["country_code"] + wire["cellphone"]
            zones = clock.zones(number, _key(wire, TZ_KEY), now)
            if zones is None:
                # Its zones were known where it was planned (it would be
                # deferred otherwise), not on this machine: never a guess.
                raise NoOpening(
                    "a recipient has no time zone here to hold the send window in: nothing was sent"
                )
            own = wire.get("deployment_eta")
            if own is not None:
                eta = deployment_eta(clock.window, zones, now, own)
            elif zones in shared:
                eta = shared[zones]
            else:
                eta = shared[zones] = deployment_eta(clock.window, zones, now, None)
            if eta is not None:
                wire["deployment_eta"] = eta
    return b'{"users":' + orjson.dumps(wires) + b"}"


def lineless(phones: Sequence[str], wires: Sequence[Mapping[str, Any]]) -> list[str]:
    """The phones of the users (``wires``) with no ``deployment_squad`` of
    their own: those the run's lines carry."""
    return [p for p, w in zip(phones, wires, strict=True) if _key(w, DEPLOYMENT_SQUAD) is None]


def _key(wire: Mapping[str, Any], name: str) -> str | None:
    for item in wire.get("user_session_keys", ()):
        if item.get("key") == name:
            value: str = item["value"]
            return value
    return None


def utc_now() -> datetime:
    return datetime.now(UTC)
