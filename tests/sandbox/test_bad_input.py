"""Bad input gets the endpoint's error shape: never a 500, never a stack trace."""

from __future__ import annotations

from typing import Any

import pytest

from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(15)

GOOD = {"country_code": "+52", "cellphone": "5510001111", "user_session_keys": []}


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        ([GOOD], "JSON object"),
        ({}, "users is required"),
        ({"users": []}, "users is required"),
        ({"users": "5510001111"}, "users is required"),
        ({"users": [GOOD, "x"]}, "users[1]"),
        ({"users": [{**GOOD, "cellphone": 5510001111}]}, "users[0].cellphone"),
        ({"users": [{**GOOD, "country_code": "52"}]}, "users[0].country_code"),
        (
            {"users": [{k: v for k, v in GOOD.items() if k != "user_session_keys"}]},
            "users[0].user_session_keys",
        ),
        (
            {"users": [{**GOOD, "user_session_keys": [{"key": "a"}]}]},
            "users[0].user_session_keys[0].value",
        ),
        ({"users": [{**GOOD, "user_session_keys": ["a"]}]}, "users[0].user_session_keys[0]"),
        ({"users": [{**GOOD, "deployment_eta": "tomorrow"}]}, "users[0].deployment_eta"),
        ({"users": [{**GOOD, "deployment_eta": True}]}, "users[0].deployment_eta"),
    ],
)
async def test_send_bad_bodies_are_400_detail(
    api: Any, sb: Sandbox, body: Any, mentions: str
) -> None:
    answer = await api.call("POST", f"{sb.campaign_url}/v2/send-campaign/1001", json=body)
    assert (answer.status, list(answer.body)) == (400, ["detail"])
    assert mentions in answer.body["detail"]
    assert (await sb.snapshot())["companies"][0]["received_users"] == 0


@pytest.mark.parametrize("data", [b"{not json", b"", b"\xff\xfe", b"x" * 10_000_000])
async def test_send_not_json_is_400(api: Any, sb: Sandbox, data: bytes) -> None:
    answer = await api.call("POST", f"{sb.campaign_url}/v2/send-campaign/1001", data=data)
    assert (answer.status, list(answer.body)) == (400, ["detail"])


async def test_send_wrong_content_type_is_400(api: Any, sb: Sandbox) -> None:
    answer = await api.call(
        "POST",
        f"{sb.campaign_url}/v2/send-campaign/1001",
        data=b"{}",
        headers={"Content-Type": "text/plain"},
    )
    assert (answer.status, list(answer.body)) == (400, ["detail"])


@pytest.mark.parametrize(
    ("body", "status"),
    [(b"{not json", 400), (b"[]", 400), (b"{}", 400), (b'{"user_session_keys": [1]}', 400)],
)
async def test_update_session_bad_bodies(api: Any, sb: Sandbox, body: bytes, status: int) -> None:
    url = f"{sb.base_url}/session/ses-1-0000000/update"
    answer = await api.call("POST", url, data=body, key=None)
    assert (answer.status, sorted(answer.body)) == (status, ["error", "message"])


async def test_update_session_only_accepts_json(api: Any, sb: Sandbox) -> None:
    url = f"{sb.base_url}/session/ses-1-0000000/update"
    answer = await api.call("POST", url, data=b"{}", headers={"Content-Type": "text/plain"})
    assert (answer.status, sorted(answer.body)) == (415, ["error", "message"])


@pytest.mark.parametrize("sandbox_options", [{"max_body_size": 1024 * 1024}])
async def test_oversized_body_is_413_in_each_shape(api: Any, sb: Sandbox) -> None:
    big = b'{"users": [' + b" " * (2 * 1024 * 1024) + b"]}"
    answer = await api.call("POST", f"{sb.campaign_url}/v2/send-campaign/1001", data=big)
    assert (answer.status, list(answer.body)) == (413, ["detail"])
    answer = await api.call("POST", f"{sb.base_url}/session/ses-1-0000000/update", data=big)
    assert (answer.status, sorted(answer.body)) == (413, ["error", "message"])


async def test_ten_megabytes_of_users_are_accepted(api: Any, sb: Sandbox) -> None:
    users = [api.user(f"55{i:08d}", ("name", "x" * 40)) for i in range(80_000)]
    answer = await api.send(users)
    assert answer.status == 202
    assert (await sb.snapshot(users=False))["companies"][0]["received_users"] == 80_000


async def test_handler_crash_is_500_without_trace(
    api: Any, sb: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: Any) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(sb.world, "launch", boom)
    answer = await api.send([GOOD])
    assert (answer.status, list(answer.body)) == (500, ["detail"])
    assert "secret" not in answer.text
    assert "Traceback" not in answer.text
