"""Recipient-local send windows: when a recipient may be messaged, in the
time zone of their phone number (or the one they were given).

Pure: every function takes "now" and returns what follows from it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import UTC, datetime, time, timedelta
from functools import lru_cache
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs
import phonenumbers
from phonenumbers import timezone as phone_zones

from .._input.validation import Problems, raise_problems

TZ_KEY: Final = "tz"
"""The session variable that gives a user's time zone (a CSV ``tz`` column)."""

_HH_MM = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")
_MINUTE: Final = timedelta(minutes=1)
_DAY_NAMES: Final = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _time_of(name: str, value: object, problems: Problems) -> time | None:
    if isinstance(value, time):
        if value.tzinfo is not None:
            problems.append((name, "must be a local time without tzinfo (it is the recipient's)"))
            return None
        return value
    if isinstance(value, str) and (match := _HH_MM.fullmatch(value.strip())):
        return time(int(match[1]), int(match[2]))
    problems.append((name, f"must be a datetime.time or 'HH:MM' text, got {value!r}"))
    return None


def _days_of(value: object, problems: Problems) -> frozenset[int] | None:
    if value is None:
        return None
    items = list(value) if isinstance(value, Iterable) and not isinstance(value, str) else None
    if (
        items is None
        or not items
        or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= 6 for d in items)
    ):
        problems.append(
            (
                "send_window.days",
                f"must be weekdays 0-6 (Monday = 0), at least one, or None, got {value!r}",
            )
        )
        return None
    return frozenset(items)


@attrs.frozen(init=False)
class SendWindow:
    """When recipients may be messaged, in each one's own time zone: from
    ``start`` to ``end`` (a :class:`datetime.time` or ``"HH:MM"``; ``end``
    after ``start``, the same day) on the weekdays ``days`` (Monday = 0;
    every day when None). Bad values raise :class:`ValidationError` naming
    the field."""

    start: time
    end: time
    days: frozenset[int] | None

    def __init__(self, start: time | str, end: time | str, *, days: Iterable[int] | None = None):
        problems: Problems = []
        first = _time_of("send_window.start", start, problems)
        last = _time_of("send_window.end", end, problems)
        allowed = _days_of(days, problems)
        if first is not None and last is not None and not last > first:
            problems.append(
                ("send_window.end", f"must be after start ({first:%H:%M}), got {last:%H:%M}")
            )
        raise_problems(problems)
        assert first is not None
        assert last is not None
        self.__attrs_init__(first, last, allowed)

    @classmethod
    def parse(cls, text: str, days: str | None = None) -> SendWindow:
        """A window from ``"09:00-20:00"`` and, optionally, ``"mon-fri"`` or ``"sat,sun"``."""
        start, sep, end = text.partition("-")
        if not sep:
            raise_problems([("send_window", f"expected 'HH:MM-HH:MM', got {text!r}")])
        return cls(start, end, days=None if days is None else parse_days(days))

    def as_json(self) -> dict[str, Any]:
        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "days": None if self.days is None else sorted(self.days),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SendWindow:
        return cls(
            time.fromisoformat(data["start"]), time.fromisoformat(data["end"]), days=data["days"]
        )

    def contains(self, local: datetime) -> bool:
        """Whether the local date-time ``local`` is inside the window."""
        return (self.days is None or local.weekday() in self.days) and (
            self.start <= local.time() < self.end
        )

    def next_opening(self, now: datetime, zone: ZoneInfo) -> datetime | None:
        """None if ``now`` (aware) is inside the window in ``zone``; otherwise
        the window's next opening there, as an aware UTC datetime."""
        local = now.astimezone(zone)
        if self.contains(local):
            return None
        # Two weeks: a week, and a day a zone's calendar skipped (Samoa, 2011).
        for ahead in range(15):
            day = local.date() + timedelta(days=ahead)
            if self.days is not None and day.weekday() not in self.days:
                continue
            opening = datetime.combine(day, self.start, tzinfo=zone).astimezone(UTC)
            # A start that a daylight-saving jump skips that day lands elsewhere.
            if opening > now and self.contains(opening.astimezone(zone)):
                if opening.astimezone(zone).time() != self.start:
                    # Skipped (02:30 on a day that jumps from 02:00 to 03:00,
                    # read as 03:30): the window opened with the jump, at 03:00.
                    while (earlier := opening - _MINUTE) > now and self.contains(
                        earlier.astimezone(zone)
                    ):
                        opening = earlier
                return opening
        raise AssertionError(f"{self!r} never opens in {zone}")  # pragma: no cover


def parse_days(text: str) -> list[int]:
    """Weekdays from ``"mon-fri"``, ``"sat,sun"`` or ``"mon,wed-fri"`` (Monday = 0)."""
    days: list[int] = []
    for part in text.lower().split(","):
        first, _, last = part.strip().partition("-")
        try:
            low = _DAY_NAMES.index(first[:3])
            high = _DAY_NAMES.index(last[:3]) if last else low
        except ValueError:
            raise_problems(
                [("send_window.days", f"expected days like 'mon-fri' or 'sat,sun', got {text!r}")]
            )
            raise
        if high < low:
            raise_problems([("send_window.days", f"{part.strip()!r} runs backwards")])
        days.extend(range(low, high + 1))
    return days


@lru_cache(maxsize=512)
def zone_named(name: str) -> ZoneInfo | None:
    """The IANA zone ``name`` (``"America/Bogota"``), or None if there is none."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


@lru_cache(maxsize=4096)
def _zone_names_of_prefix(phone: str) -> tuple[str, ...]:
    try:
        number = phonenumbers.parse(phone)
    except phonenumbers.NumberParseException:
        return ()
    return tuple(
        name
        for name in phone_zones.time_zones_for_number(number)
        if name != phone_zones.UNKNOWN_TIMEZONE
    )


def zone_of_phone(phone: str) -> ZoneInfo | None:
    """The time zone of ``phone`` (``+`` country code and number) as
    ``phonenumbers`` knows it from its prefix, or None if it knows none.

    Where a prefix covers several zones (mobile numbers of Russia, Australia,
    Indonesia...), the first one ``phonenumbers`` lists (alphabetically):
    give those users their zone (a ``tz`` column, or ``tz_for=``).
    """
    # A prefix is enough: the zones come from the number's leading digits.
    names = _zone_names_of_prefix(phone)
    return zone_named(names[0]) if names else None


def zone_for(phone: str, tz: str | None) -> ZoneInfo | None:
    """The recipient's zone: ``tz`` when given (None if it names no zone),
    else the zone of the number."""
    return zone_named(tz) if tz else zone_of_phone(phone)


def deployment_eta(
    window: SendWindow, zone: ZoneInfo, now: datetime, eta: int | None
) -> int | None:
    """The ``deployment_eta`` (UNIX seconds) a recipient in ``zone`` is sent
    with: their own ``eta`` if it is inside the window (or absent while now
    is), else the window's next opening after it (or after now)."""
    when = now if eta is None else max(now, datetime.fromtimestamp(eta, UTC))
    opening = window.next_opening(when, zone)
    if opening is None:
        return eta
    # Whole seconds, rounded up: never a moment before the window opens.
    return math.ceil(opening.timestamp())
