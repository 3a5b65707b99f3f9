"""Recipient-local send windows: the window's rules, as properties."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit import SendWindow, ValidationError
from campaignkit.bulk._windows import deployment_eta, parse_days, zone_for, zone_of_phone

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


@settings(max_examples=400, deadline=None)
@given(windows(), st.sampled_from(ZONES), instants, st.none() | instants)
def test_the_eta_is_inside_the_window_never_past_and_within_a_week(
    window: SendWindow, zone_name: str, now: datetime, own: datetime | None
) -> None:
    zone = ZoneInfo(zone_name)
    own_eta = None if own is None else int(own.timestamp())
    eta = deployment_eta(window, zone, now, own_eta)
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


@settings(max_examples=200, deadline=None)
@given(windows(), st.sampled_from(ZONES), instants)
def test_no_moment_of_the_window_is_skipped(
    window: SendWindow, zone_name: str, now: datetime
) -> None:
    """The opening is the first moment inside: a minute before it is outside."""
    zone = ZoneInfo(zone_name)
    opening = window.next_opening(now, zone)
    if opening is None:
        return
    earlier = opening - timedelta(minutes=1)
    assert earlier < now or not window.contains(earlier.astimezone(zone))


def test_a_closed_window_opens_next_morning_in_the_recipients_zone() -> None:
    window = SendWindow("09:00", "20:00")
    bogota = ZoneInfo("America/Bogota")
    night = datetime(2026, 11, 26, 3, 0, tzinfo=UTC)  # 22:00 the day before in Bogota
    eta = deployment_eta(window, bogota, night, None)
    assert eta == int(datetime(2026, 11, 26, 9, 0, tzinfo=bogota).timestamp())
    noon = datetime(2026, 11, 26, 17, 0, tzinfo=UTC)  # 12:00 in Bogota
    assert deployment_eta(window, bogota, noon, None) is None


def test_a_start_skipped_by_daylight_saving_opens_with_the_jump() -> None:
    """02:00 jumps to 03:00 in New York on 8 March 2026: a window from 02:30
    is open from 03:00 (not from 03:30, where 02:30 read in summer time lands)."""
    window = SendWindow("02:30", "04:00")
    new_york = ZoneInfo("America/New_York")
    midnight = datetime(2026, 3, 8, 0, 0, tzinfo=new_york)
    assert window.next_opening(midnight, new_york) == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)


def test_allowed_days_skip_the_weekend() -> None:
    window = SendWindow(time(9), time(17), days=parse_days("mon-fri"))
    madrid = ZoneInfo("Europe/Madrid")
    saturday = datetime(2026, 11, 28, 11, 0, tzinfo=madrid)
    opening = window.next_opening(saturday, madrid)
    assert opening == datetime(2026, 11, 30, 9, 0, tzinfo=madrid)


def test_an_own_eta_outside_the_window_moves_to_its_next_opening() -> None:
    window = SendWindow("09:00", "20:00")
    utc = ZoneInfo("UTC")
    now = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
    late = int(datetime(2026, 11, 27, 22, 0, tzinfo=UTC).timestamp())
    inside = int(datetime(2026, 11, 27, 12, 0, tzinfo=UTC).timestamp())
    assert deployment_eta(window, utc, now, inside) == inside
    assert deployment_eta(window, utc, now, late) == int(
        datetime(2026, 11, 28, 9, 0, tzinfo=UTC).timestamp()
    )


def test_zones_come_from_the_number_and_a_given_zone_wins() -> None:
    assert zone_of_phone("+573001234567") == ZoneInfo("America/Bogota")
    assert zone_of_phone("+12125551234") == ZoneInfo("America/New_York")
    assert zone_of_phone("+14155551234") == ZoneInfo("America/Los_Angeles")
    # Several zones for the prefix: the first phonenumbers lists, every time.
    assert zone_of_phone("+61412345678") == ZoneInfo("Australia/Adelaide")
    assert zone_for("+61412345678", "Australia/Perth") == ZoneInfo("Australia/Perth")
    assert zone_for("+573001234567", "Mars/Olympus") is None
    assert zone_of_phone("+999123") is None


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
