"""Bad input is refused before anything is sent, with a message that names
the field, says what was expected and what was given (issue 18: no more
"got float" or "UTF-8 string, got str"), and session variables have a size
limit: names up to 128 characters, values up to 4096."""

from __future__ import annotations

import re
from typing import Any

import pytest
from helpers.exchange import ScriptedExchange
from helpers.tracking import CAMPAIGN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaignkit import CampaignClient, ResponseError, SessionKey, User, ValidationError
from campaignkit.webhooks import extract_reply

pytestmark = pytest.mark.timeout(60)

BASE = "https://main.example.com"
ACK = {
    "message": "queued",
    "id": "1",
    "batch_id": "b",
    "launch_request_id": "lr",
    "status_url": "/v2/send-campaign/lr",
}
UPDATED = {"message": "ok", "session_id": "s"}
# The old shapes: a type's bare name after "got", or "UTF-8 string" said of a str.
OLD_SHAPE = re.compile(r"got [a-z]+$|UTF-8 string")
not_text = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.binary(max_size=5), st.lists(st.none())
)


def user(**fields: Any) -> User:
    return User(**{"cellphone": "3001234567", "country_code": "+57", **fields})


async def problems_of(call: str, *args: Any) -> tuple[tuple[str, str], ...]:
    """The problems of a call that must be refused before any request."""
    mocked = ScriptedExchange()
    async with CampaignClient("k" * 20, base_url=BASE, campaign_url=CAMPAIGN, exchange=mocked) as c:
        with pytest.raises(ValidationError) as caught:
            await getattr(c, call)(*args)
    assert mocked.requests == []
    for _, message in caught.value.problems:
        assert not OLD_SHAPE.search(message), message
    return caught.value.problems


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=not_text)
async def test_a_session_value_that_is_not_text_says_what_was_given(value: Any) -> None:
    problems = await problems_of(
        "send_campaign", 1, [user(user_session_keys=[SessionKey("plan", value)])]
    )
    [(path, message)] = problems
    assert path == "users[0].user_session_keys[0].value"
    assert message.startswith("must be text (a str), but ")
    assert f"{'None' if value is None else type(value).__name__}" in message
    assert "'plan'" in message  # which variable


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=not_text)
async def test_a_cellphone_that_is_not_text_says_what_was_given_without_repeating_it(
    value: Any,
) -> None:
    [(path, message)] = await problems_of("send_campaign", 1, [user(cellphone=value)])
    assert path == "users[0].cellphone"
    assert "was given" in message
    if value is not None and not isinstance(value, bool):
        assert f"({value!r})" not in message  # a phone number is personal data


async def test_a_value_utf8_cannot_encode_says_where_the_surrogate_is() -> None:
    keys = {"plan": "gold\udcff"}
    [(path, message)] = await problems_of("update_session", "s", keys)
    assert path == "user_session_keys[0].value"
    assert "lone surrogate '\\udcff' at position 4" in message


@pytest.mark.parametrize(
    ("keys", "path", "words"),
    [
        ({"plan": "x" * 4097}, "user_session_keys[0].value", "at most 4096 characters"),
        ({"k" * 129: "x"}, "user_session_keys[0].key", "at most 128 characters"),
        ({"": "x"}, "user_session_keys[0].key", "must not be empty"),
        ({"plan": "é" * 4097}, "user_session_keys[0].value", "at most 4096 characters"),
    ],
)
async def test_session_variables_over_the_limit_are_refused_naming_the_field(
    keys: dict[str, str], path: str, words: str
) -> None:
    for call, args in (
        ("update_session", ("s", keys)),
        ("send_campaign", (1, [user(user_session_keys=keys)])),
    ):
        problems = await problems_of(call, *args)
        prefix = "" if call == "update_session" else "users[0]."
        assert [p for p, _ in problems] == [prefix + path]
        assert words in problems[0][1]


@pytest.mark.parametrize("size", [4096, 1])
async def test_session_variables_at_the_limit_are_sent(size: int) -> None:
    mocked = ScriptedExchange()
    mocked.post(f"{BASE}/session/s/update", payload=UPDATED)
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/1", payload=ACK)
    keys = {"k" * 128: "v" * size, "plan": "é" * size}
    async with CampaignClient("k" * 20, base_url=BASE, campaign_url=CAMPAIGN, exchange=mocked) as c:
        await c.update_session("s", keys)
        await c.send_campaign(1, [user(user_session_keys=keys)])
    bodies = mocked.bodies()
    assert bodies[0]["user_session_keys"][0] == {"key": "k" * 128, "value": "v" * size}
    assert bodies[1]["users"][0]["user_session_keys"][1] == {"key": "plan", "value": "é" * size}


@pytest.mark.parametrize(
    ("args", "path", "words"),
    [
        ((1, [user(country_code=57)]), "users[0].country_code", "but an int (57) was given"),
        ((1, ["x"]), "users[0]", "must be a User, but a str ('x') was given"),
        ((1, 5), "users", "must be an iterable of User, but an int (5) was given"),
        ((1.5, [user()]), "poll_id", "must be a str or an int, but a float (1.5) was given"),
        (
            (1, [user(user_session_keys=3)]),
            "users[0].user_session_keys",
            "but an int (3) was given",
        ),
        ((1, [user(deployment_eta=-1)]), "users[0].deployment_eta", "but an int (-1) was given"),
        (
            (1, [user(user_session_keys=[SessionKey("plan", "gold", type=3)])]),  # type: ignore[arg-type]
            "users[0].user_session_keys[0].type",
            "must be text (a str), but an int (3) was given",
        ),
        (
            (1, [user(user_session_keys=[SessionKey("plan", "gold", type="t\udcff")])]),
            "users[0].user_session_keys[0].type",
            "lone surrogate '\\udcff' at position 1",
        ),
    ],
)
async def test_messages_say_what_was_expected_and_what_was_given(
    args: tuple[Any, ...], path: str, words: str
) -> None:
    problems = await problems_of("send_campaign", *args)
    assert problems[0][0] == path
    assert words in problems[0][1]


@pytest.mark.parametrize(
    ("polls", "words"),
    [
        ([{"id": 1, "name": 2.5}], "expected a string, got a number (2.5) at $[0].name"),
        ([{"id": 1.5, "name": "p"}], "expected an integer, got a number (1.5) at $[0].id"),
    ],
)
async def test_answers_of_the_wrong_shape_name_what_came_in_jsons_words(
    polls: Any, words: str
) -> None:
    mocked = ScriptedExchange()
    mocked.get(f"{BASE}/poll/api/all", payload=polls)
    async with CampaignClient("k" * 20, base_url=BASE, exchange=mocked) as client:
        with pytest.raises(ResponseError) as caught:
            await client.list_polls()
    assert words in str(caught.value)


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"session_external_id": 1.5}, "must be a string, got a number (1.5)"),
        ([], "the body must be a JSON object, got an array"),
    ],
)
def test_webhook_bodies_of_the_wrong_shape_name_what_came_in_jsons_words(
    payload: Any, words: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        extract_reply(payload)
    assert caught.value.problems[0][1] == words
