"""The client against the sandbox over real HTTP: every call, and every fault
kind giving the behaviour DESIGN.md promises (reads retried, sends never
duplicated: the admin snapshot counts each user once)."""

from __future__ import annotations

from typing import Any

import pytest

from campaignkit import (
    AmbiguousSendError,
    CampaignState,
    DeploymentStatus,
    NotFoundError,
    RedirectError,
    ResponseError,
    RetiredEndpointError,
)
from campaignkit.client import CampaignClient
from campaignkit.models import SessionKey, User, deployment_squad
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
def client_options() -> dict[str, Any]:
    return {"timeout": 5.0, "max_retries": 3}


def _user(cellphone: str, **kw: Any) -> User:
    return User(cellphone=cellphone, country_code="+52", **kw)


async def _received(sb: Sandbox) -> dict[str, int]:
    counts: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    return counts


async def test_every_call(client: CampaignClient, sb: Sandbox) -> None:
    polls = await client.list_polls()
    assert [p.id for p in polls] == [1001, 1002, 1003]
    agents = await client.list_agents()
    assert len(agents) == 3
    assert all(agent.tags for agent in agents)
    lines = (await sb.snapshot(users=False))["companies"][0]["lines"]
    users = [
        _user("5510009905", user_session_keys={"name": "Ana"}),
        _user("5510001111", user_session_keys=[deployment_squad(lines[1])]),
    ]
    ack = await client.send_campaign(1001, users)
    await sb.set_clock(advance=60)
    status = await client.get_campaign_status(ack.launch_request_id)
    assert status.status is CampaignState.DONE
    assert [d.status for d in status.deployments] == [
        DeploymentStatus.PUSH_NOTIFICATION,
        DeploymentStatus.DELIVERED,
    ]
    reply = await sb.reply("5510001111")
    session_id = reply["session_external_id"]
    update = await client.update_session(session_id, [SessionKey("plan", "gold")])
    assert update.session_id == session_id
    history = await client.get_session_history(session_id)
    assert [entry.message.sender for entry in history] == ["AI", "USER", "AI"]
    page = await client.list_sessions(1001, limit=2)
    assert len(page.results) == 2
    assert page.next_id
    every = [s.id async for s in client.iter_sessions(1001, page_size=2)]
    assert len(every) == len(set(every)) == 6  # 5 seeded + the reply's session
    with (
        pytest.warns(DeprecationWarning, match="15 November 2026"),
        pytest.raises(RetiredEndpointError),
    ):
        await client.deploy_legacy(1001, users)
    assert await _received(sb) == {"+525510009905": 1, "+525510001111": 1}


@pytest.mark.parametrize("sandbox_options", [{"legacy_enabled": True}])
async def test_legacy_deploy_when_enabled(client: CampaignClient, sb: Sandbox) -> None:
    with pytest.warns(DeprecationWarning, match="send_campaign"):
        result = await client.deploy_legacy(1001, [_user("5510001111")])
    assert len(result.conversations_id) == 1
    assert result.new_last_scheduleded_deployment.tzinfo is not None


async def test_tracker_sees_every_transition(client: CampaignClient, sb: Sandbox) -> None:
    await sb.set_clock(speed=10)  # 100 ms steps, polled every 20 ms
    ack = await client.send_campaign(1001, [_user("5510009914"), _user("5510001111")])
    seen: dict[str, list[DeploymentStatus | None]] = {}
    tracker = client.track(ack, until="settled", poll_interval=0.02, max_interval=0.05, timeout=10)
    async for change in tracker:
        seen.setdefault(change.deployment.cellphone, []).append(change.current)
    snapshot = await sb.snapshot(launch=ack.launch_request_id)
    for user in snapshot["companies"][0]["launches"][0]["users"]:
        path = [DeploymentStatus(h["status"]) for h in user["history"]]
        # Reported back in WhatsApp's Mexican form, as the network does.
        assert seen["1" + user["cellphone"]] == path


async def test_unknown_poll_and_launch(client: CampaignClient) -> None:
    with pytest.raises(NotFoundError):
        await client.send_campaign(4242, [_user("5510001111")])
    with pytest.raises(NotFoundError):
        await client.get_campaign_status("nope")


@pytest.mark.parametrize("kind", ["429", "500", "502", "503", "504", "drop"])
async def test_reads_are_retried(client: CampaignClient, sb: Sandbox, kind: str) -> None:
    await sb.set_faults({"kind": kind, "route": "list_polls", "count": 1, "retry_after": 0})
    assert len(await client.list_polls()) == 3
    assert (await sb.admin("GET", "/faults"))["faults"][0]["fired"] == 1


@pytest.mark.parametrize("kind", ["truncated", "empty", "wrong_type", "html"])
async def test_unreadable_answers_are_response_errors(
    client: CampaignClient, sb: Sandbox, kind: str
) -> None:
    await sb.set_faults(
        {"kind": kind, "route": "list_polls", **({"status": 200} if kind == "html" else {})}
    )
    with pytest.raises(ResponseError):
        await client.list_polls()


async def test_json_with_a_wrong_content_type_is_read(client: CampaignClient, sb: Sandbox) -> None:
    # Documented leniency: a body that parses as JSON of the right shape is
    # accepted whatever its Content-Type.
    await sb.set_faults({"kind": "wrong_content_type", "route": "list_polls"})
    assert len(await client.list_polls()) == 3


async def test_redirect_is_refused(client: CampaignClient, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "redirect", "route": "list_agents"})
    with pytest.raises(RedirectError):
        await client.list_agents()


@pytest.mark.parametrize("kind", ["500", "502", "503", "504", "drop", "drop_mid_body", "truncated"])
async def test_ambiguous_send_is_never_resent(
    client: CampaignClient, sb: Sandbox, kind: str
) -> None:
    await sb.set_faults({"kind": kind, "route": "send_campaign", "when": "after", "count": 1})
    with pytest.raises(AmbiguousSendError):
        await client.send_campaign(1001, [_user("5510001111")])
    assert await _received(sb) == {"+525510001111": 1}


async def test_refused_send_is_retried_once_accepted(client: CampaignClient, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "429", "route": "send_campaign", "count": 2, "retry_after": 0})
    ack = await client.send_campaign(1001, [_user("5510001111")])
    assert ack.launch_request_id
    assert await _received(sb) == {"+525510001111": 1}


async def test_latency_past_the_timeout_on_a_send_is_ambiguous(sb: Sandbox) -> None:
    await sb.set_faults(
        {"kind": "latency", "seconds": 1.0, "route": "send_campaign", "when": "after"}
    )
    async with sb.client(timeout=0.3, max_retries=3) as client:
        with pytest.raises(AmbiguousSendError):
            await client.send_campaign(1001, [_user("5510001111")])
    assert await _received(sb) == {"+525510001111": 1}
