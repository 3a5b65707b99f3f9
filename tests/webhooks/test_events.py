"""parse_event: every published sample body read by its fields; any JSON object
read without raising."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from helpers import webhook_samples as samples
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit import Location, SessionKey
from campaignkit.webhooks import EventKind, parse_event

BY_KIND = [
    (samples.RESPONSE, EventKind.RESPONSE, datetime(2019, 1, 1, tzinfo=UTC)),
    (samples.DELIVERED, EventKind.DELIVERED, datetime(2019, 1, 1, 0, 0, 5, 250000, tzinfo=UTC)),
    (samples.READ, EventKind.READ, datetime(2019, 1, 1, 0, 1, tzinfo=UTC)),
    (samples.OPT_OUT, EventKind.OPT_OUT, datetime(2019, 1, 1, tzinfo=UTC)),
    (samples.TIMEOUT, EventKind.TIMEOUT, datetime(2019, 1, 2, tzinfo=UTC)),
    (samples.CONDITION, EventKind.CONDITION, None),
]


@pytest.mark.parametrize(("payload", "kind", "at"), BY_KIND)
def test_flat_events_by_their_fields(payload: dict[str, Any], kind: EventKind, at: Any) -> None:
    event = parse_event(payload)
    assert event.kind is kind
    assert event.session_id == "1234"
    assert (event.country_code, event.cellphone) == ("+57", "3161234567")
    assert event.conversation_id == "5678"
    assert event.occurred_at == at
    assert event.payload is payload


def test_response_keeps_key_types_and_reads_a_location() -> None:
    event = parse_event(samples.RESPONSE)
    assert event.answer == "Si necesito"
    name, loc = event.user_session_keys
    assert name == SessionKey("name", "Juan")
    assert loc.type == "location"
    assert loc.location == Location(4.59, -72.03, "Carrera 7")
    assert name.location is None


def test_conversation_closed_is_nested() -> None:
    event = parse_event(samples.CONVERSATION_CLOSED)
    assert event.kind is EventKind.CONVERSATION_CLOSED
    assert event.session_id == "sess-9"
    assert (event.country_code, event.cellphone) == ("+57", "3161234567")
    assert event.occurred_at == datetime(2019, 1, 3, 10, tzinfo=UTC)
    assert event.keys == {"name": "Juan"}


def test_template_status_has_no_session() -> None:
    event = parse_event(samples.TEMPLATE_STATUS)
    assert event.kind is EventKind.TEMPLATE_STATUS
    assert event.session_id is None
    assert event.event_id == "5f8d7e6a5f8d7e6a5f8d7e6a"
    assert event.occurred_at == datetime(2024, 9, 10, 12, 34, 56, 789000, tzinfo=UTC)


def test_the_specs_shape_and_unknown_shapes() -> None:
    spec = parse_event({"session_external_id": "s-1", "user_session_keys": {"a": 1}})
    assert (spec.kind, spec.session_id, spec.keys) == (EventKind.UNKNOWN, "s-1", {"a": "1"})
    odd = parse_event({"what": "else", "delivered_at": "not a time"})
    assert (odd.kind, odd.occurred_at, odd.payload) == (EventKind.DELIVERED, None, odd.payload)
    assert parse_event([1, 2]).kind is EventKind.UNKNOWN


def test_times_out_of_range_in_utc_are_none() -> None:
    # Year 1 east of UTC or year 9999 west of it has no UTC datetime.
    for at in ("0001-01-01T00:00:00+01:00", "9999-12-31 23:59:59-05:00"):
        event = parse_event({**samples.READ, "read_at": at})
        assert (event.kind, event.occurred_at) == (EventKind.READ, None)


def test_location_of_bad_values_is_none() -> None:
    for value in ("", "[]", '{"latitude": "x", "longitude": 1}', '{"latitude": 1}', "1" * 5000):
        assert SessionKey("loc", value, "location").location is None


OFFSETS = st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
TIMES = st.datetimes(timezones=st.none() | st.builds(timezone, OFFSETS)).map(str)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | TIMES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = st.sampled_from(
    [
        "session_id",
        "session",
        "user",
        "responded_at",
        "actual_response",
        "delivered_at",
        "read_at",
        "reason",
        "timeout_at",
        "variable",
        "condition",
        "event_type",
        "timestamp",
        "user_session_keys",
        "conversation_id",
        "cellphone",
        "country_code",
        "event_id",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(FIELDS | st.text(max_size=8), JSON, max_size=8))
def test_any_json_object_is_read(payload: dict[str, Any]) -> None:
    event = parse_event(payload)
    assert event.payload is payload
    assert event.session_id is None or isinstance(event.session_id, str)
    assert event.occurred_at is None or event.occurred_at.tzinfo is UTC
    for key in event.user_session_keys:
        assert isinstance(key.key, str)
        assert isinstance(key.value, str)
        assert key.location is None or isinstance(key.location, Location)
