"""Every endpoint of the spec over real HTTP: happy paths, auth, errors, hosts."""

from __future__ import annotations

from typing import Any

import pytest

from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(10)


def _url(sb: Sandbox, name: str) -> tuple[str, str]:
    routes = {
        "send_campaign": ("POST", f"{sb.campaign_url}/v2/send-campaign/1001"),
        "campaign_status": ("GET", f"{sb.campaign_url}/v2/send-campaign/abc"),
        "list_sessions": ("GET", f"{sb.base_url}/devapi/poll/1001/sessions"),
        "list_agents": ("GET", f"{sb.agent_url}/agent/company/agents"),
        "session_history": ("GET", f"{sb.base_url}/devapi/session/ses-1-0000000/history"),
        "list_polls": ("GET", f"{sb.base_url}/poll/api/all"),
    }
    return routes[name]


async def test_send_campaign_answers_202_ack(api: Any) -> None:
    answer = await api.send([api.user("5512345678")])
    assert answer.status == 202
    ack = answer.body
    assert set(ack) == {"message", "id", "batch_id", "launch_request_id", "status_url"}
    assert ack["id"] == "1001"
    assert ack["status_url"] == f"/v2/send-campaign/{ack['launch_request_id']}"


async def test_campaign_status_record(api: Any, sb: Sandbox) -> None:
    # Slowed down: the first status step cannot come before the read, however loaded the machine.
    await sb.set_clock(speed=0.001)
    ack = (await api.send([api.user("5512345678")])).body
    record = (await api.status(ack["launch_request_id"])).body
    assert record == {
        "launch_request_id": ack["launch_request_id"],
        "status": "PENDING",
        "poll_id": 1001,
        "deployments": [],
    }


async def test_poll_id_in_body_or_400(api: Any, sb: Sandbox) -> None:
    url = f"{sb.campaign_url}/v2/send-campaign"
    ok = await api.call("POST", url, json={"poll_id": 1002, "users": [api.user("5512345678")]})
    assert ok.status == 202
    assert ok.body["id"] == "1002"
    missing = await api.call("POST", url, json={"users": [api.user("5512345678")]})
    assert missing.status == 400
    assert "poll id is required" in missing.body["detail"]


async def test_unknown_poll_and_launch_are_404_detail(api: Any) -> None:
    answer = await api.send([api.user("5512345678")], poll_id=4242)
    assert (answer.status, list(answer.body)) == (404, ["detail"])
    answer = await api.status("nope")
    assert (answer.status, list(answer.body)) == (404, ["detail"])


async def test_detail_in_spanish(api: Any) -> None:
    answer = await api.status("nope", headers={"Accept-Language": "es-ES,es;q=0.9"})
    assert answer.body["detail"].startswith("No se encontró")
    answer = await api.status("nope", headers={"Accept-Language": "en-US"})
    assert answer.body["detail"].startswith("Launch request")


@pytest.mark.parametrize(
    "name",
    [
        "send_campaign",
        "campaign_status",
        "list_sessions",
        "list_agents",
        "session_history",
        "list_polls",
    ],
)
@pytest.mark.parametrize("key", [None, "wrong-key"])
async def test_missing_or_unknown_key_is_401(
    api: Any, sb: Sandbox, name: str, key: str | None
) -> None:
    method, url = _url(sb, name)
    answer = await api.call(method, url, key=key, json={"users": [api.user("5512345678")]})
    assert answer.status == 401
    expected = ["detail"] if name in ("send_campaign", "campaign_status") else ["error", "message"]
    assert sorted(answer.body) == expected


async def test_bearer_scheme_accepted(api: Any, sb: Sandbox) -> None:
    answer = await api.call("GET", f"{sb.base_url}/poll/api/all", key=f"Bearer {sb.api_key}")
    assert answer.status == 200


async def test_list_polls(api: Any, sb: Sandbox) -> None:
    answer = await api.call("GET", f"{sb.base_url}/poll/api/all")
    assert answer.status == 200
    assert [set(poll) for poll in answer.body] == [{"id", "name"}] * 3
    assert all(isinstance(poll["id"], int) for poll in answer.body)


async def test_list_agents_only_active_with_tags(api: Any, sb: Sandbox) -> None:
    answer = await api.call("GET", f"{sb.agent_url}/agent/company/agents")
    assert answer.status == 200
    assert len(answer.body) == 3  # the fourth agent is inactive
    for agent in answer.body:
        assert set(agent) == {"id", "first_name", "last_name", "email", "tags"}
        assert agent["tags"]
        assert all(set(tag) == {"id", "name"} for tag in agent["tags"])


async def test_agents_only_on_agent_host(api: Any, sb: Sandbox) -> None:
    answer = await api.call("GET", f"{sb.base_url}/agent/company/agents")
    assert (answer.status, sorted(answer.body)) == (404, ["error", "message"])
    answer = await api.call("GET", f"{sb.campaign_url}/poll/api/all")
    assert (answer.status, list(answer.body)) == (404, ["detail"])


async def test_list_sessions_out_of_the_box(api: Any, sb: Sandbox) -> None:
    answer = await api.call("GET", f"{sb.base_url}/devapi/poll/1001/sessions")
    assert answer.status == 200
    assert answer.body["next_id"] == ""
    assert len(answer.body["results"]) == 5
    session = answer.body["results"][0]
    assert set(session) == {"id", "created_at", "finished_at", "user"}
    assert len(session["created_at"]) == len("2026-01-01 00:00:00.000000")
    assert set(session["user"]) == {"country_code", "cellphone"}


async def test_session_history_shape(api: Any, sb: Sandbox) -> None:
    answer = await api.call("GET", f"{sb.base_url}/devapi/session/ses-1-0000000/history")
    assert answer.status == 200
    assert [entry["type"] for entry in answer.body] == ["MESSAGE", "MESSAGE"]
    assert [entry["message"]["sender"] for entry in answer.body] == ["AI", "USER"]
    message = answer.body[0]["message"]
    assert set(message) == {
        "type",
        "sender",
        "text",
        "file_url",
        "created_at",
        "delivered_at",
        "read_at",
        "extra",
    }
    assert isinstance(message["created_at"], int)


async def test_unknown_session_is_404(api: Any, sb: Sandbox) -> None:
    for session_id in ("ses-999-0000000", "ses-1-9999999", "whatever"):
        answer = await api.call("GET", f"{sb.base_url}/devapi/session/{session_id}/history")
        assert (answer.status, sorted(answer.body)) == (404, ["error", "message"])


async def test_update_session_needs_no_key(api: Any, sb: Sandbox) -> None:
    url = f"{sb.base_url}/session/ses-1-0000000/update"
    body = {"user_session_keys": [{"key": "plan", "value": "gold"}]}
    answer = await api.call("POST", url, json=body, key=None)
    assert answer.body == {"message": "Session updated.", "session_id": "ses-1-0000000"}
    history = await api.call("GET", f"{sb.base_url}/devapi/session/ses-1-0000000/history")
    assert [e["message"]["sender"] for e in history.body] == ["AI", "USER", "AI"]


async def test_update_unknown_session_is_404(api: Any, sb: Sandbox) -> None:
    url = f"{sb.base_url}/session/nope/update"
    answer = await api.call("POST", url, json={"user_session_keys": []})
    assert (answer.status, sorted(answer.body)) == (404, ["error", "message"])


async def test_legacy_is_retired_by_default(api: Any, sb: Sandbox) -> None:
    url = f"{sb.base_url}/deployment/api/poll/1001"
    answer = await api.call("POST", url, json={"users": [api.user("5512345678")]})
    assert answer.status == 410
    assert answer.body["error"] == "gone"
    assert "15 November 2026" in answer.body["message"]
    assert (await sb.snapshot())["companies"][0]["received_users"] == 0


@pytest.mark.parametrize("sandbox_options", [{"legacy_enabled": True}])
async def test_legacy_when_enabled(api: Any, sb: Sandbox) -> None:
    url = f"{sb.base_url}/deployment/api/poll/1001"
    users = [api.user("5512345678"), api.user("5512345679")]
    answer = await api.call("POST", url, json={"users": users})
    assert answer.status == 200
    body = answer.body
    assert set(body) == {
        "message",
        "id",
        "batch_id",
        "new_last_scheduleded_deployment",
        "conversations_id",
    }
    assert body["id"] == "1001"
    assert len(body["conversations_id"]) == 2
    assert body["new_last_scheduleded_deployment"].endswith("Z")
    launch = (await sb.snapshot())["companies"][0]["launches"][0]
    assert (launch["endpoint"], launch["user_count"]) == ("deploy_legacy", 2)


async def test_unknown_path_and_method(api: Any, sb: Sandbox) -> None:
    answer = await api.call("GET", f"{sb.root_url}/v2/send-campaign/x")
    assert answer.status == 404
    answer = await api.call("DELETE", f"{sb.base_url}/poll/api/all")
    assert (answer.status, sorted(answer.body)) == (405, ["error", "message"])
