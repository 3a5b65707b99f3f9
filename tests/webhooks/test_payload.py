"""campaignkit.webhooks: reading a first-reply payload (no server involved)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from campaignkit import SessionKey, ValidationError
from campaignkit.webhooks import extract_reply


def test_extract_top_level_with_list_keys() -> None:
    payload = {
        "session_external_id": "s-1",
        "user_session_keys": [{"key": "name", "value": "Ana"}, {"key": "n", "value": 3}],
    }
    event = extract_reply(payload)
    assert event.session_external_id == "s-1"
    assert event.user_session_keys == (SessionKey("name", "Ana"), SessionKey("n", "3"))
    assert event.keys == {"name": "Ana", "n": "3"}
    assert event.payload is payload


@pytest.mark.parametrize(
    "payload",
    [
        {"data": {"session_external_id": "s-2", "user_session_keys": {"a": "b"}}},
        {
            "event": "first_reply",
            "session": {"session_external_id": "s-2"},
            "user_session_keys": {"a": "b"},
        },
        {
            "data": {
                "session": {
                    "session_external_id": "s-2",
                    "user_session_keys": [{"key": "a", "value": "b"}],
                }
            }
        },
        {
            "payload": {
                "body": {"webhook": {"session_external_id": "s-2", "user_session_keys": {"a": "b"}}}
            }
        },
    ],
)
def test_extract_nested(payload: dict[str, Any]) -> None:
    event = extract_reply(payload)
    assert event.session_external_id == "s-2"
    assert event.keys == {"a": "b"}


def test_extract_prefers_top_level_and_integer_ids() -> None:
    event = extract_reply({"session_external_id": 42, "data": {"session_external_id": "x"}})
    assert event.session_external_id == "42"
    assert event.user_session_keys == ()


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ([], "$"),
        ("s-1", "$"),
        ({}, "session_external_id"),
        ({"session_external_id": ""}, "session_external_id"),
        ({"session_external_id": None}, "session_external_id"),
        ({"session_external_id": True}, "session_external_id"),
        ({"session_external_id": {"id": "x"}}, "session_external_id"),
        ({"data": {"session": {"session_external_id": 1.5}}}, "data.session.session_external_id"),
        ({"unrelated": {"session_external_id": "too-far-from-a-known-key"}}, "session_external_id"),
        (
            {"data": {"data": {"data": {"data": {"session_external_id": "too-deep"}}}}},
            "session_external_id",
        ),
    ],
)
def test_extract_rejects_naming_the_path(payload: Any, path: str) -> None:
    with pytest.raises(ValidationError) as raised:
        extract_reply(payload)
    assert [p for p, _ in raised.value.problems] == [path]
    assert isinstance(raised.value, ValueError)  # what extract_reply raised before


def test_malformed_keys_are_skipped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "campaignkit.webhooks")
    event = extract_reply(
        {
            "session_external_id": "s",
            "user_session_keys": [{"key": "a", "value": "1"}, "junk", {"key": "b"}],
        }
    )
    assert event.keys == {"a": "1"}
    [record] = caplog.records
    assert "2 malformed" in record.getMessage()
    assert "junk" not in record.getMessage()
