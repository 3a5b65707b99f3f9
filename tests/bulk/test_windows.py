"""Recipient-local send windows: the window's rules, as properties, and the
zones a number is timed in."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import phonenumbers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from phonenumbers import PhoneNumberType
from phonenumbers import timezone as phone_zones

from campaignkit import SendWindow, ValidationError
from campaignkit._report import ZONE_UNKNOWN, deferral_reason
from campaignkit.bulk._windows import (
    SEARCH_DAYS,
    NoOpening,
    RecipientClock,
    deployment_eta,
    parse_days,
    zone_names_of_phone,
)

pytestmark = pytest.mark.timeout(60)

ZONES = [
    "America/Bogota",
    "America/New_York",
    "America/Sao_Paulo",
    "Europe/London",
    "Europe/Madrid",
    "Australia/Lord_Howe",  # a half-hour daylight-saving jump
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "UTC",
]

RUSSIAN_MOBILE = "+79161234567"
KAMCHATKA_LINE = "+74152123456"  # a fixed line of Petropavlovsk-Kamchatsky
SPANISH_MOBILE = "+34612345678"
AUSTRALIAN_MOBILE = "+61412345678"
UNZONED = "+573301234567"  # a Colombian number phonenumbers knows no zone for

# Numbers of one zone, and numbers whose prefix spans several.
PHONES = [
    "+573001234567",
    "+12125551234",
    "+447911123456",
    RUSSIAN_MOBILE,
    KAMCHATKA_LINE,
    SPANISH_MOBILE,
    "+34922123456",  # a fixed line of Tenerife
    AUSTRALIAN_MOBILE,
    "+5511987654321",
    "+6281234567890",  # Indonesia's mobiles: three zones
]

minutes = st.integers(0, 24 * 60 - 1)


@st.composite
def windows(draw: st.DrawFn) -> SendWindow:
    start = draw(st.integers(0, 24 * 60 - 2))
    end = draw(st.integers(start + 1, 24 * 60 - 1))
    days = draw(st.none() | st.frozensets(st.integers(0, 6), min_size=1))
    return SendWindow(time(start // 60, start % 60), time(end // 60, end % 60), days=days)


instants = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 12, 31), timezones=st.just(UTC)
)


def inside_all(window: SendWindow, instant: datetime, zones: tuple[ZoneInfo, ...]) -> bool:
    return all(window.contains(instant.astimezone(zone)) for zone in zones)


def clock_zones(phone: str, window: SendWindow, now: datetime) -> tuple[ZoneInfo, ...]:
    zones = RecipientClock(window).zones(phone, None, now)
    assert zones is not None
    return zones


@settings(max_examples=400, deadline=None)
@given(windows(), st.sampled_from(ZONES), instants, st.none() | instants)
def test_the_eta_is_inside_the_window_never_past_and_within_a_week(
    window: SendWindow, zone_name: str, now: datetime, own: datetime | None
) -> None:
    zone = ZoneInfo(zone_name)
    own_eta = None if own is None else int(own.timestamp())
    eta = deployment_eta(window, (zone,), now, own_eta)
    when = now if own_eta is None else max(now, datetime.fromtimestamp(own_eta, UTC))
    if window.contains(when.astimezone(zone)):
        assert eta == own_eta  # inside: sent as the user asked (or now)
        return
    assert eta is not None
    sent_at = datetime.fromtimestamp(eta, UTC)
    assert window.contains(sent_at.astimezone(zone))
    assert sent_at >= when
    # A week of the recipient's clock: one that goes back in it adds its hour.
    assert sent_at - when <= timedelta(days=7, hours=1)


@settings(max_examples=400, deadline=None)
@given(windows(), st.sampled_from(PHONES), instants)
def test_the_opening_holds_in_every_zone_of_the_number_and_none_earlier_does(
    window: SendWindow, phone: str, now: datetime
) -> None:
    """For any window and instant, the ETA chosen lies inside the window in
    every zone of the number, and no moment between now and it does."""
    clock = RecipientClock(window)
    zones = clock.zones(phone, None, now)
    if zones is None:
        # Deferred, never guessed: its zones share no moment of the window.
        names = zone_names_of_phone(phone)
        assert len(names) > 1
        assert window.first_open(now, [ZoneInfo(name) for name in names]) is None
        assert deferral_reason(clock.deferral(phone, None, now)) == ZONE_UNKNOWN
        return
    assert {str(zone) for zone in zones} == set(zone_names_of_phone(phone))
    opening = window.first_open(now, zones)
    if opening is None:  # zones sharing a moment of it today may not from now on
        with pytest.raises(NoOpening):
            deployment_eta(window, zones, now, None)
        return
    assert opening >= now
    assert inside_all(window, opening, zones)
    earlier = opening - timedelta(minutes=1)
    assert earlier < now or not inside_all(window, earlier, zones)
    eta = deployment_eta(window, zones, now, None)
    if opening == now:
        assert eta is None
    else:
        assert eta is not None
        assert inside_all(window, datetime.fromtimestamp(eta, UTC), zones)


def test_a_russian_mobile_holds_the_window_from_kaliningrad_to_kamchatka() -> None:
    """Timed in Asia/Almaty, 09:00 there was 15:00 in Kamchatka, and 09:00
    in Kamchatka 04:00 in Almaty: every zone of +7 9xx must be inside."""
    window = SendWindow("09:00", "21:00")
    now = datetime(2026, 11, 26, 22, 0, tzinfo=UTC)  # 10:00 in Kamchatka, 01:00 in Moscow
    zones = clock_zones(RUSSIAN_MOBILE, window, now)
    names = {str(zone) for zone in zones}
    assert {"Europe/Moscow", "Asia/Kamchatka", "Asia/Almaty"} <= names
    eta = deployment_eta(window, zones, now, None)
    assert eta is not None
    sent_at = datetime.fromtimestamp(eta, UTC)
    assert sent_at.astimezone(ZoneInfo("Asia/Kamchatka")).time() < time(21)
    assert sent_at.astimezone(ZoneInfo("Europe/Moscow")).time() >= time(9)
    # The first such moment: 09:00 in the westernmost zone (Bucharest, UTC+2).
    assert sent_at == datetime(2026, 11, 27, 7, 0, tzinfo=UTC)
    # A Kamchatka fixed line is timed in Kamchatka alone.
    (kamchatka,) = clock_zones(KAMCHATKA_LINE, window, now)
    assert str(kamchatka) == "Asia/Kamchatka"
    assert deployment_eta(window, (kamchatka,), now, None) is None


def test_a_russian_mobile_is_deferred_where_no_hour_fits_every_zone() -> None:
    window = SendWindow("10:00", "18:00")  # shorter than Bucharest to Kamchatka
    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    clock = RecipientClock(window)
    assert clock.zones(RUSSIAN_MOBILE, None, now) is None
    detail = clock.deferral(RUSSIAN_MOBILE, None, now)
    assert detail is not None
    assert deferral_reason(detail) == ZONE_UNKNOWN
    assert "Kamchatka" in detail
    assert "give it a tz" in detail
    # Its own tz, or the call's default, times it.
    assert clock.zones(RUSSIAN_MOBILE, "Europe/Moscow", now) == (ZoneInfo("Europe/Moscow"),)
    moscow = RecipientClock(window, ZoneInfo("Europe/Moscow"))
    assert moscow.zones(RUSSIAN_MOBILE, None, now) == (ZoneInfo("Europe/Moscow"),)
    assert moscow.deferral(RUSSIAN_MOBILE, None, now) is None


def test_a_spanish_mobile_holds_the_window_on_the_mainland_and_the_canaries() -> None:
    """20:30 in the Canaries is 21:30 in Madrid: a mobile timed by the
    Canaries alone was messaged after a 09:00-21:00 window had closed."""
    window = SendWindow("09:00", "21:00")
    evening = datetime(2026, 11, 26, 20, 30, tzinfo=UTC)
    zones = clock_zones(SPANISH_MOBILE, window, evening)
    assert set(zones) == {ZoneInfo("Europe/Madrid"), ZoneInfo("Atlantic/Canary")}
    eta = deployment_eta(window, zones, evening, None)
    # 09:00 in the Canaries (10:00 in Madrid) the next morning.
    assert eta == int(datetime(2026, 11, 27, 9, 0, tzinfo=UTC).timestamp())
    # A Tenerife fixed line is in the Canaries alone: open there now.
    (canary,) = clock_zones("+34922123456", window, evening)
    assert deployment_eta(window, (canary,), evening, None) is None


def test_an_australian_mobile_holds_the_window_from_cocos_to_lord_howe() -> None:
    window = SendWindow("09:00", "20:00")
    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    zones = clock_zones(AUSTRALIAN_MOBILE, window, now)
    assert {"Australia/Perth", "Australia/Sydney", "Indian/Cocos"} <= {str(z) for z in zones}
    # 09:00 in the Cocos Islands (UTC+6:30), 13:30 in Sydney (summer time).
    eta = deployment_eta(window, zones, now, None)
    assert eta == int(datetime(2026, 11, 27, 2, 30, tzinfo=UTC).timestamp())


def test_a_number_without_a_zone_is_deferred_or_timed_by_the_default() -> None:
    """+57 330 was timed in UTC: its 09:00 was 04:00 in Bogota."""
    window = SendWindow("09:00", "20:00")
    now = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
    assert zone_names_of_phone(UNZONED) == ()
    clock = RecipientClock(window)
    assert clock.zones(UNZONED, None, now) is None
    detail = clock.deferral(UNZONED, None, now)
    assert detail is not None
    assert deferral_reason(detail) == ZONE_UNKNOWN
    assert "knows no time zone" in detail
    bogota = ZoneInfo("America/Bogota")
    by_default = RecipientClock(window, bogota)
    assert by_default.zones(UNZONED, None, now) == (bogota,)
    eta = deployment_eta(window, (bogota,), now, None)
    assert eta == int(datetime(2026, 11, 26, 9, 0, tzinfo=bogota).timestamp())
    # The default times only the numbers that need it.
    assert by_default.zones("+12125551234", None, now) == (ZoneInfo("America/New_York"),)


@pytest.mark.parametrize("cell", ["", "   "])
def test_an_empty_tz_means_the_numbers_own_zone(cell: str) -> None:
    clock = RecipientClock(SendWindow("09:00", "20:00"))
    now = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)
    assert clock.zones("+573001234567", cell, now) == (ZoneInfo("America/Bogota"),)
    assert clock.zones("+573001234567", " Asia/Tokyo ", now) == (ZoneInfo("Asia/Tokyo"),)
    assert clock.zones("+573001234567", "Mars/Olympus", now) is None
    assert "Mars/Olympus" in (clock.deferral("+573001234567", "Mars/Olympus", now) or "")


def test_a_start_skipped_by_a_jump_forward_opens_with_the_jump() -> None:
    """02:00 jumps to 03:00 in New York on 8 March 2026: a window from 02:30
    is open from 03:00 (not from 03:30, where 02:30 read in summer time lands)."""
    window = SendWindow("02:30", "04:00")
    new_york = ZoneInfo("America/New_York")
    midnight = datetime(2026, 3, 8, 0, 0, tzinfo=new_york)
    assert window.first_open(midnight, [new_york]) == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
    # London jumps from 01:00 to 02:00 on 29 March 2026.
    london = ZoneInfo("Europe/London")
    window = SendWindow("01:15", "09:00")
    night = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # 00:30 GMT
    assert window.first_open(night, [london]) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_a_start_repeated_by_a_jump_back_opens_again_the_same_night() -> None:
    """London goes back from 02:00 to 01:00 on 25 October 2026: at 01:10
    the second time, a window from 01:30 opens at the second 01:30, twenty
    minutes later (it used to open a day late)."""
    window = SendWindow("01:30", "03:00")
    london = ZoneInfo("Europe/London")
    second_pass = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # 01:10 GMT
    assert not window.contains(second_pass.astimezone(london))
    opening = window.first_open(second_pass, [london])
    assert opening == datetime(2026, 10, 25, 1, 30, tzinfo=UTC)
    # New York goes back on 1 November 2026, from 02:00 EDT to 01:00 EST.
    new_york = ZoneInfo("America/New_York")
    window = SendWindow("01:20", "01:40")
    after_first = datetime(2026, 11, 1, 5, 45, tzinfo=UTC)  # 01:45 EDT
    assert window.first_open(after_first, [new_york]) == datetime(2026, 11, 1, 6, 20, tzinfo=UTC)


def test_a_window_no_day_of_which_comes_within_the_search_is_no_opening() -> None:
    """A window of one weekday in two zones a day apart across the date line:
    Monday in Samoa is Sunday in Hawaii, never both."""
    window = SendWindow("09:00", "10:00", days=[0])
    zones = (ZoneInfo("Pacific/Apia"), ZoneInfo("Pacific/Honolulu"))
    now = datetime(2026, 11, 26, tzinfo=UTC)
    assert window.first_open(now, zones) is None
    with pytest.raises(NoOpening, match=f"within {SEARCH_DAYS} days"):
        deployment_eta(window, zones, now, None)


def test_allowed_days_skip_the_weekend() -> None:
    window = SendWindow(time(9), time(17), days=parse_days("mon-fri"))
    madrid = ZoneInfo("Europe/Madrid")
    saturday = datetime(2026, 11, 28, 11, 0, tzinfo=madrid)
    assert window.first_open(saturday, [madrid]) == datetime(2026, 11, 30, 9, 0, tzinfo=madrid)


def test_an_own_eta_outside_the_window_moves_to_its_next_opening() -> None:
    window = SendWindow("09:00", "20:00")
    utc = (ZoneInfo("UTC"),)
    now = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
    late = int(datetime(2026, 11, 27, 22, 0, tzinfo=UTC).timestamp())
    inside = int(datetime(2026, 11, 27, 12, 0, tzinfo=UTC).timestamp())
    assert deployment_eta(window, utc, now, inside) == inside
    assert deployment_eta(window, utc, now, late) == int(
        datetime(2026, 11, 28, 9, 0, tzinfo=UTC).timestamp()
    )


def test_zones_come_from_the_whole_number() -> None:
    assert zone_names_of_phone("+573001234567") == ("America/Bogota",)
    assert zone_names_of_phone("+12125551234") == ("America/New_York",)
    assert zone_names_of_phone("+14155551234") == ("America/Los_Angeles",)
    assert len(zone_names_of_phone(AUSTRALIAN_MOBILE)) > 1
    assert zone_names_of_phone("+999123") == ()
    assert zone_names_of_phone("+57abc") == ()


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        (("25:00", "20:00"), {}, "send_window.start"),
        (("09:00", "9pm"), {}, "send_window.end"),
        (("20:00", "09:00"), {}, "send_window.end"),
        (("09:00", "09:00"), {}, "send_window.end"),
        ((time(9), time(20)), {"days": []}, "send_window.days"),
        ((time(9), time(20)), {"days": [7]}, "send_window.days"),
        ((time(9), time(20)), {"days": "mon"}, "send_window.days"),
        ((time(9, tzinfo=UTC), time(20)), {}, "send_window.start"),
    ],
)
def test_bad_windows_name_the_field(
    args: tuple[object, object], kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        SendWindow(*args, **kwargs)  # type: ignore[arg-type]
    assert [path for path, _ in caught.value.problems] == [field]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12), st.text(max_size=12))
def test_any_text_makes_a_window_or_a_validation_error(start: str, end: str) -> None:
    problems: tuple[tuple[str, str], ...] = ()
    try:
        window = SendWindow(start, end)
    except ValidationError as exc:
        problems = exc.problems
    else:
        assert window.end > window.start
    assert all(path.startswith("send_window.") for path, _ in problems)


def test_windows_parse_and_round_trip() -> None:
    window = SendWindow.parse("09:00-20:00", "mon-fri")
    assert window == SendWindow(time(9), time(20), days=range(5))
    assert SendWindow.from_json(window.as_json()) == window
    assert parse_days("sat,sun") == [5, 6]
    assert parse_days("mon,wed-fri") == [0, 2, 3, 4]
    for bad in ("funday", "fri-mon"):
        with pytest.raises(ValidationError):
            parse_days(bad)
    with pytest.raises(ValidationError):
        SendWindow.parse("0900")


def _parsed_zones(phone: str) -> tuple[str, ...]:
    try:
        names = phone_zones.time_zones_for_number(phonenumbers.parse(phone))
    except phonenumbers.NumberParseException:
        return ()
    return () if phone_zones.UNKNOWN_TIMEZONE in names else tuple(names)


EXAMPLES = sorted(
    phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    for region in phonenumbers.SUPPORTED_REGIONS
    for kind in (PhoneNumberType.FIXED_LINE, PhoneNumberType.MOBILE, PhoneNumberType.TOLL_FREE)
    if (number := phonenumbers.example_number_for_type(region, kind)) is not None
)


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(EXAMPLES),
    st.integers(1, 6),
    st.integers(0, 10**6),
    st.sampled_from(["", "0", "8", "1"]),
)
def test_the_fast_reading_of_a_number_gives_the_zones_parse_gives(
    example: str, changed: int, ending: int, inserted: str
) -> None:
    """Any country's numbers, valid or not, with a trunk prefix or not: the
    zones read without ``phonenumbers.parse`` are those it gives."""
    number = phonenumbers.parse(example)
    code = str(number.country_code)
    national = example[1 + len(code) :]
    national = inserted + national[:-changed] + str(ending).zfill(changed)[-changed:]
    phone = f"+{code}{national}"
    assert zone_names_of_phone(phone) == _parsed_zones(phone)
