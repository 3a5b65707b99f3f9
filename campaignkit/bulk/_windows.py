"""Recipient-local send windows: when a recipient may be messaged, in the
time zone of their phone number (or the one they were given).

Pure: every function takes "now" and returns what follows from it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import attrs
import phonenumbers
from phonenumbers import timezone as phone_zones

from .._input.validation import Problems, raise_problems
from .._report import ZONE_UNKNOWN, deferral_detail
from ..errors import CampaignKitError

TZ_KEY: Final = "tz"
"""The session variable that gives a user's time zone (a CSV ``tz`` column)."""

SEARCH_DAYS: Final = 15
"""How far ahead a window's opening is looked for: a week of allowed days,
and a week more for zones a day apart and a day a calendar skipped (Samoa,
2011). A number whose zones share no moment of the window in that time is
deferred (``zone unknown``)."""

_HH_MM = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")
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

    def first_open(self, now: datetime, zones: Sequence[ZoneInfo]) -> datetime | None:
        """The first instant from ``now`` (aware) at which the window is open
        in every one of ``zones`` at once: ``now`` itself if it is; None if
        there is none within :data:`SEARCH_DAYS` days."""
        if all(self.contains(now.astimezone(zone)) for zone in zones):
            return now
        # Being inside begins, in each zone, where its clock reads the
        # window's start (twice, in an hour a jump back repeats; at the jump,
        # where a jump forward skips it) or where its clock jumps: the first
        # of those instants inside in every zone is the first inside them all.
        candidates = sorted(
            {
                instant
                for zone in zones
                for instant in (*self._openings(now, zone), *_jumps(now, zone))
                if instant > now
            }
        )
        for instant in candidates:
            if all(self.contains(instant.astimezone(zone)) for zone in zones):
                return instant
        return None

    def _openings(self, now: datetime, zone: ZoneInfo) -> Iterator[datetime]:
        today = now.astimezone(zone).date()
        for ahead in range(SEARCH_DAYS):
            day = today + timedelta(days=ahead)
            if self.days is None or day.weekday() in self.days:
                yield from _instants_at(day, self.start, zone)


def _instants_at(day: date, wall: time, zone: ZoneInfo) -> tuple[datetime, ...]:
    """The instants at which the clock of ``zone`` reads ``wall`` on ``day``:
    one, two in an hour a jump back repeats, or, where a jump forward
    skips it, the jump."""
    naive = datetime.combine(day, wall)
    first = naive.replace(tzinfo=zone).astimezone(UTC)  # fold=0: the earlier reading
    if first.astimezone(zone).replace(tzinfo=None) == naive:
        return (first, naive.replace(tzinfo=zone, fold=1).astimezone(UTC))
    # Skipped: read with the offset before the jump it is after it, read with
    # the offset after it before it; the jump lies between, to the second.
    before = math.floor(naive.replace(tzinfo=zone, fold=1).timestamp())
    after = math.ceil(first.timestamp())
    while after - before > 1:
        middle = (before + after) // 2
        if datetime.fromtimestamp(middle, zone).replace(tzinfo=None) >= naive:
            after = middle
        else:
            before = middle
    return (datetime.fromtimestamp(after, UTC),)


def _jumps(now: datetime, zone: ZoneInfo) -> Iterator[datetime]:
    """The instants within :data:`SEARCH_DAYS` days of ``now`` at which the
    clock of ``zone`` changes its offset (at most one a day: no zone has two)."""
    day = timedelta(days=1)
    offset = now.astimezone(zone).utcoffset()
    for ahead in range(SEARCH_DAYS):
        low = now + ahead * day
        high = low + day
        if (following := high.astimezone(zone).utcoffset()) == offset:
            continue
        before, after = math.floor(low.timestamp()), math.ceil(high.timestamp())
        while after - before > 1:
            middle = (before + after) // 2
            if datetime.fromtimestamp(middle, zone).utcoffset() == offset:
                before = middle
            else:
                after = middle
        offset = following
        yield datetime.fromtimestamp(after, UTC)


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


def given_zone(tz: str | None) -> str | None:
    """The zone a user's ``tz`` names: None when it names none (absent,
    or empty: an empty CSV cell means the number's own zone)."""
    return (tz.strip() or None) if tz else None


def zone_names_of_phone(phone: str) -> tuple[str, ...]:
    """Every time zone ``phonenumbers`` gives ``phone`` (``+`` country code
    and number): one, several (the mobiles of Russia, Australia, Spain...),
    or none (a number it does not know)."""
    number = _read(phone)
    names = () if number is None else phone_zones.time_zones_for_number(number)
    if phone_zones.UNKNOWN_TIMEZONE in names or not names:
        # The slow reading, for what the fast one does not know (a number
        # written with its trunk prefix, one with leading zeros): parse's.
        try:
            names = phone_zones.time_zones_for_number(phonenumbers.parse(phone))
        except phonenumbers.NumberParseException:
            return ()
    return () if phone_zones.UNKNOWN_TIMEZONE in names else tuple(names)


def _read(phone: str) -> phonenumbers.PhoneNumber | None:
    """``phone`` read as ``+``, country code, national number (at a third of
    what ``phonenumbers.parse`` costs); None for a national number with
    leading zeros (Italy's, or a trunk prefix), which only parse reads right."""
    digits = phone[1:]
    for size in (1, 2, 3):
        if (code := digits[:size]).isdigit() and int(code) in _COUNTRY_CODES:
            national = digits[size:]
            if not national.isdigit() or national[0] == "0":
                return None
            return phonenumbers.PhoneNumber(country_code=int(code), national_number=int(national))
    return None


_COUNTRY_CODES: Final = frozenset(phonenumbers.COUNTRY_CODE_TO_REGION_CODE)


# Per number, not per prefix: only the whole number tells phonenumbers whether
# it is valid, and of which type (mobiles have their country's zones, fixed
# lines their area's). Big enough for what a send plans before it sends.
@lru_cache(maxsize=1 << 15)
def _number_zones(phone: str) -> tuple[ZoneInfo, ...] | None:
    """The zones of ``phone``; None if there are none, or this machine's
    zone database lacks one of them."""
    names = zone_names_of_phone(phone)
    zones = tuple(zone for name in names if (zone := zone_named(name)) is not None)
    return zones if names and len(zones) == len(names) else None


@lru_cache(maxsize=4096)
def _share_a_moment(window: SendWindow, zones: tuple[ZoneInfo, ...], day: date) -> bool:
    # By the day: the answer changes only with the zones' daylight saving.
    return window.first_open(datetime.combine(day, time(), UTC), zones) is not None


@attrs.frozen
class RecipientClock:
    """A run's window, and the zone it times the numbers it cannot time by
    their own (``default_tz=``), if any."""

    window: SendWindow
    default_zone: ZoneInfo | None = None

    def zones(self, phone: str, tz: str | None, now: datetime) -> tuple[ZoneInfo, ...] | None:
        """The zones the window must hold in for ``phone``: its ``tz`` when it
        names one (None if it names no zone), else every zone of its number
        when they share a moment of the window within :data:`SEARCH_DAYS`
        days of ``now``; else the default zone; None when there is none."""
        named = given_zone(tz)
        if named is not None:
            zone = zone_named(named)
            return None if zone is None else (zone,)
        zones = _number_zones(phone)
        if zones is not None and (
            len(zones) == 1 or _share_a_moment(self.window, zones, now.date())
        ):
            return zones
        return None if self.default_zone is None else (self.default_zone,)

    def deferral(self, phone: str, tz: str | None, now: datetime) -> str | None:
        """Why ``phone`` cannot be timed (the ledger detail of a recipient
        deferred for it), or None when it can."""
        if self.zones(phone, tz, now) is not None:
            return None
        names = zone_names_of_phone(phone)
        if (named := given_zone(tz)) is not None:
            why = f"its tz {named!r} is no time zone on this machine"
        elif not names:
            why = "phonenumbers knows no time zone for this number"
        elif _number_zones(phone) is None:
            missing = ", ".join(name for name in names if zone_named(name) is None)
            why = f"this machine's time zone database lacks {missing}"
        else:
            west, *_, east = sorted(names, key=lambda name: _offset(name, now))
            why = (
                f"the {len(names)} time zones of this number (from {west} to {east}) share "
                f"no moment of the window {self.window.start:%H:%M}-{self.window.end:%H:%M} "
                f"within {SEARCH_DAYS} days"
            )
        return deferral_detail(ZONE_UNKNOWN, f"{why}: give it a tz (or default_tz=)")


def _offset(name: str, now: datetime) -> timedelta:
    zone = zone_named(name)
    assert zone is not None
    offset = now.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def deployment_eta(
    window: SendWindow, zones: Sequence[ZoneInfo], now: datetime, eta: int | None
) -> int | None:
    """The ``deployment_eta`` (UNIX seconds) a recipient whose window must
    hold in ``zones`` is sent with: their own ``eta`` if it is inside the
    window (or absent while now is), else the window's next opening in them
    all after it (or after now). Raises :class:`NoOpening` when there is
    none within :data:`SEARCH_DAYS` days."""
    when = now if eta is None else max(now, datetime.fromtimestamp(eta, UTC))
    opening = window.first_open(when, zones)
    if opening is None:
        raise NoOpening(
            f"no moment of the window {window.start:%H:%M}-{window.end:%H:%M} within "
            f"{SEARCH_DAYS} days is inside it in every one of "
            f"{', '.join(str(zone) for zone in zones)}: nothing was sent"
        )
    if opening == when:
        return eta
    # Whole seconds, rounded up: never a moment before the window opens.
    return math.ceil(opening.timestamp())


class NoOpening(CampaignKitError):
    """A recipient the window cannot be held for at send time (its zones
    shared a moment of it when it was planned): its request is not sent."""
