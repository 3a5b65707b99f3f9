"""The I/O seam's request and answer made through their slots (the hot path)
are the objects their public constructors make."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit._io.exchange import Answer
from campaignkit._wire import sansio as wire
from campaignkit._wire.frozen import field_setters
from campaignkit.config import ClientConfig
from campaignkit.models import User

CONFIG = ClientConfig("sk_frozen_0123456789", campaign_url="https://c.example.com")


def made_through_slots(cls: type, *values: object) -> Any:
    made: Any = object.__new__(cls)
    for set_field, value in zip(field_setters(cls), values, strict=True):
        set_field(made, value)
    return made


def assert_same(made: Any, expected: Any) -> None:
    assert type(made) is type(expected)
    assert made == expected
    assert repr(made) == repr(expected)
    assert attrs.astuple(made, recurse=False) == attrs.astuple(expected, recurse=False)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.url = "https://elsewhere.example.com"


@given(
    st.integers(100, 599),
    st.dictionaries(st.sampled_from(["Content-Type", "Retry-After"]), st.text()),
    st.binary(),
)
@settings(max_examples=100, deadline=None)
def test_an_answer_through_its_slots_is_the_constructors(
    status: int, headers: dict[str, str], body: bytes
) -> None:
    assert_same(made_through_slots(Answer, status, headers, body), Answer(status, headers, body))
    hashable = tuple(headers.items())
    made = made_through_slots(Answer, status, hashable, body)
    assert hash(made) == hash(Answer(status, hashable, body))  # type: ignore[arg-type]


@given(
    st.sampled_from([wire.SEND_CAMPAIGN, wire.CAMPAIGN_STATUS]),
    st.from_regex(r"[A-Za-z0-9]{1,12}", fullmatch=True),
    st.none() | st.dictionaries(st.text(max_size=3), st.integers(-(2**63), 2**63 - 1)),
    st.lists(st.just(User(country_code="+57", cellphone="3001234567")), max_size=2).map(tuple),
)
@settings(max_examples=100, deadline=None)
def test_a_built_request_is_the_constructors(
    endpoint: wire.Endpoint, segment: str, json: object, users: tuple[User, ...]
) -> None:
    name = "poll_id" if endpoint is wire.SEND_CAMPAIGN else "launch_request_id"
    request = wire.build_request(
        CONFIG, endpoint, path_params={name: segment}, json=json, users=users
    )
    expected = wire.Request(endpoint, request.url, request.headers, request.body, users)
    assert_same(request, expected)
    assert request.url == f"https://c.example.com/v2/send-campaign/{segment}"
    assert (request.body is None) is (json is None)


def test_only_classes_whose_init_just_sets_fields_are_made_so() -> None:
    @attrs.frozen
    class Checked:
        value: int = attrs.field(validator=attrs.validators.instance_of(int))

    @attrs.frozen
    class Converted:
        value: int = attrs.field(converter=int)

    @attrs.frozen
    class Hooked:
        value: int

        def __attrs_post_init__(self) -> None:
            pass

    for cls in (Checked, Converted, Hooked):
        with pytest.raises(TypeError, match="does more than set its fields"):
            field_setters(cls)
