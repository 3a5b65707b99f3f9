"""parse_event: every published sample body read by its fields; any JSON object
read without raising."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from helpers import webhook_samples as samples
from hypothesis import given, settings
from hypothesis import strategies as st
from webhooks.receivers import HUBSPOT_CLOSED, UNKNOWN

from campaignkit import Location, SessionKey
from campaignkit.webhooks import (
    Condition,
    EventKind,
    Question,
    TemplateStatus,
    parse_event,
)
from campaignkit.webhooks._checks import problem_of

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


def test_conversation_closed_hubspot_variant_is_flat() -> None:
    event = parse_event(HUBSPOT_CLOSED)
    assert (event.kind, event.session_id) == (EventKind.CONVERSATION_CLOSED, "sess-9")
    assert event.occurred_at == datetime(2019, 1, 3, 10, tzinfo=UTC)
    assert problem_of(event) is None
    with_phone = parse_event({**HUBSPOT_CLOSED, "country_code": "+57", "cellphone": "316"})
    assert (with_phone.country_code, with_phone.cellphone) == ("+57", "316")


def test_a_closed_event_without_its_id_names_where_the_id_was_wanted() -> None:
    hubspot = parse_event({"closed_at": "2019-01-03 10:00:00", "external_id": ""})
    nested = parse_event({**samples.CONVERSATION_CLOSED, "session": {"closed_at": "x"}})
    assert problem_of(hubspot) == "external_id: missing or empty"
    assert problem_of(nested) == "session.external_id: missing or empty"


def test_template_status_has_no_session() -> None:
    event = parse_event(samples.TEMPLATE_STATUS)
    assert event.kind is EventKind.TEMPLATE_STATUS
    assert event.session_id is None
    assert event.event_id == "5f8d7e6a5f8d7e6a5f8d7e6a"
    assert event.occurred_at == datetime(2024, 9, 10, 12, 34, 56, 789000, tzinfo=UTC)
    assert event.template == TemplateStatus("welcome_message", "APPROVED", ("12345", "67890"))
    assert (event.question, event.condition, event.classified_answer) == (None, None, None)
    # Its event_type decides, whatever else the body holds.
    odd = parse_event({**samples.TEMPLATE_STATUS, "closed_at": "2019-01-03 10:00:00"})
    assert (odd.kind, odd.session_id) == (EventKind.TEMPLATE_STATUS, None)


def test_the_question_and_the_classified_answer_are_typed() -> None:
    response = parse_event(samples.RESPONSE)
    question = Question("closed", "conversation-question-text", ("answer-text",))
    assert (response.question, response.answer) == (question, "Si necesito")
    assert response.classified_answer == "answer-text"
    opt_out = parse_event(samples.OPT_OUT)
    assert (opt_out.classified_answer, opt_out.answer) == ("STOP", None)
    open_question = Question("open", "conversation-question-text")
    for body in (samples.DELIVERED, samples.READ, samples.OPT_OUT, samples.TIMEOUT):
        event = parse_event(body)
        assert event.question == open_question
        assert (event.condition, event.template) == (None, None)
    assert parse_event(samples.DELIVERED).classified_answer is None


def test_the_condition_is_typed() -> None:
    event = parse_event(samples.CONDITION)
    assert event.condition == Condition("age", "30", "GTE", "18")
    assert (event.question, event.template) == (None, None)
    numbers = {**samples.CONDITION, "variable": {"name": "age", "value": 30}}
    numbers["condition"] = {"operator": "LT", "value": 17.5}
    assert parse_event(numbers).condition == Condition("age", "30", "LT", "17.5")


def test_fields_of_the_wrong_type_read_as_absent() -> None:
    odd = {
        **samples.RESPONSE,
        "question": {"type": 1, "text": ["x"], "answers": [{"text": "a"}, "b", {"text": 2}]},
        "classified_answer": "answer-text",
    }
    event = parse_event(odd)
    assert (event.question, event.classified_answer) == (Question(answers=("a",)), None)
    assert parse_event({**samples.READ, "question": "text"}).question is None
    template = {**samples.TEMPLATE_STATUS, "affected_conversation_ids": [1, "2", None, True]}
    assert parse_event(template).template == TemplateStatus(
        "welcome_message", "APPROVED", ("1", "2")
    )
    condition = {**samples.CONDITION, "variable": [], "condition": {"operator": None}}
    assert parse_event(condition).kind is EventKind.UNKNOWN  # no longer a condition's shape


def test_an_unpublished_body_is_unknown_with_its_payload() -> None:
    # No published page shows an account-level deployment failure event: unknown.
    event = parse_event(UNKNOWN)
    assert (event.kind, event.session_id, event.payload) == (EventKind.UNKNOWN, None, UNKNOWN)
    assert problem_of(event) is None


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
        "question",
        "classified_answer",
        "external_id",
        "closed_at",
        "name",
        "status",
        "affected_conversation_ids",
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
    assert event.classified_answer is None or isinstance(event.classified_answer, str)
    typed = (event.question, event.condition, event.template)
    for found, kind in zip(typed, (Question, Condition, TemplateStatus), strict=True):
        assert found is None or isinstance(found, kind)
        for value in attrs.astuple(found) if found is not None else ():
            texts = value if isinstance(value, tuple) else (value,)
            assert all(text is None or isinstance(text, str) for text in texts)
    if "closed_at" in payload and payload.get("event_type") != "hsm.status":
        assert event.kind is EventKind.CONVERSATION_CLOSED
