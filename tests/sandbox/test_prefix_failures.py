"""Numbers of a prefix failing at a chosen rate: the share holds, the same
numbers fail on every rerun, other prefixes are untouched, and the tracker
and the webhooks see the failures."""

from __future__ import annotations

from collections import Counter
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from helpers.sandbox_api import Api
from helpers.servers import serving

from campaignkit import CampaignClient, DeploymentStatus, User
from campaignkit.sandbox import Sandbox
from campaignkit.webhooks import EventKind, parse_event

pytestmark = pytest.mark.timeout(60)

S = DeploymentStatus
NOT_DELIVERED = S.FAILURE_BY_META_CHOSE_NOT_DELIVER
MAX_OFF = 0.035  # 3.4 standard deviations of a 0.3 share over 2,000 numbers


def numbers(count: int, first: str = "300") -> list[str]:
    """``count`` cellphones (no magic ``99NN`` ending among them)."""
    return [f"{first}{1_000_000 + i:07d}" for i in range(count)]


async def finals(sb: Sandbox, api: Any, users: list[dict[str, Any]]) -> dict[str, str]:
    """Send ``users``; each phone's final wire status."""
    ack = (await api.send(users)).body
    await sb.set_clock(advance=60)
    launch = (await sb.snapshot(launch=ack["launch_request_id"]))["companies"][0]["launches"][0]
    return {u["country_code"] + u["cellphone"]: u["final_status"] for u in launch["users"]}


def colombians(api: Any, cellphones: list[str]) -> list[dict[str, Any]]:
    return [api.user(cellphone, country_code="+57") for cellphone in cellphones]


def failing(statuses: dict[str, str]) -> set[str]:
    return {phone for phone, status in statuses.items() if status != S.DELIVERED}


async def test_the_share_holds_and_other_prefixes_are_untouched(
    sb: Sandbox, api: Any, client: CampaignClient
) -> None:
    rule = await sb.fail_prefix("+57300", rate=0.3, status=NOT_DELIVERED)
    assert rule == {
        "prefix": "+57300",
        "rate": 0.3,
        "status": NOT_DELIVERED.value,
        "seed": 0,
        "drawn": 0,
        "failed": 0,
    }
    users = [User(cellphone=c, country_code="+57") for c in numbers(2000)]
    others = [User(cellphone=c, country_code="+57") for c in numbers(300, "310")]
    # The same digits in another country: a prefix starts with its country code.
    mexicans = [User(cellphone=c, country_code="+52") for c in numbers(300)]
    ack = await client.send_campaign(1001, [*users, *others, *mexicans])
    await sb.set_clock(advance=60)
    seen: dict[str, S] = {}
    tracker = client.track(ack, until="settled", poll_interval=0.01, max_interval=0.05, timeout=20)
    async for change in tracker:
        seen[change.deployment.conversation_id] = change.current
    assert len(seen) == 2600
    statuses = [status for _, status in sorted(seen.items(), key=lambda kv: _index(kv[0]))]
    prefixed = Counter(statuses[:2000])
    assert set(prefixed) == {S.DELIVERED, NOT_DELIVERED}
    assert abs(prefixed[NOT_DELIVERED] / 2000 - 0.3) < MAX_OFF
    assert set(statuses[2000:]) == {S.DELIVERED}
    [counted] = await sb.failures()
    assert (counted["drawn"], counted["failed"]) == (2000, prefixed[NOT_DELIVERED])


def _index(conversation_id: str) -> int:
    return int(conversation_id.rsplit("-", 1)[1])


async def test_the_same_numbers_fail_on_every_rerun(sb: Sandbox, api: Any) -> None:
    users = colombians(api, numbers(2000))
    await sb.fail_prefix("+57300", rate=0.3)
    first = failing(await finals(sb, api, users))
    assert failing(await finals(sb, api, users)) == first
    async with Sandbox(speed=50) as same, aiohttp.ClientSession() as http:
        other = Api(same, http)
        await same.fail_prefix("+57300", rate=0.3)
        assert failing(await finals(same, other, users)) == first
        await same.clear_failures()
        await same.fail_prefix("+57300", rate=0.3, seed=1)
        reseeded = failing(await finals(same, other, users))
    assert reseeded != first
    assert abs(len(reseeded) / 2000 - 0.3) < MAX_OFF


async def test_a_higher_rate_keeps_failing_those_a_lower_one_failed(sb: Sandbox, api: Any) -> None:
    users = colombians(api, numbers(2000))
    await sb.fail_prefix("+57300", rate=0.3)
    low = failing(await finals(sb, api, users))
    await sb.fail_prefix("+57300", rate=0.5)  # replaces the prefix's rule
    high = failing(await finals(sb, api, users))
    assert low < high
    assert abs(len(high) / 2000 - 0.5) < MAX_OFF
    assert len(await sb.failures()) == 1


async def test_each_failure_walks_its_status_path(sb: Sandbox, api: Any) -> None:
    await sb.fail_prefix("+57300", rate=1.0)  # status FAILURE by default
    ack = (await api.send(colombians(api, numbers(3)))).body
    await sb.set_clock(advance=60)
    launch = (await sb.snapshot(launch=ack["launch_request_id"]))["companies"][0]["launches"][0]
    for user in launch["users"]:
        path = [h["status"] for h in user["history"]]
        assert path == ["RECEIVED", "RECEIVED_BY_WORKER", "RETRY", "FAILURE"]


async def test_magic_and_invalid_numbers_keep_their_outcome_and_the_longest_prefix_wins(
    sb: Sandbox, api: Any
) -> None:
    await sb.fail_prefix("+57", rate=1.0, status=S.FAILURE_BY_TIER_CAPACITY)
    await sb.fail_prefix("+57300", rate=1.0, status=S.FAILURE_BY_SPAM_RATE_LIMIT)
    await sb.fail_prefix("+573001", rate=0.0)
    users = colombians(api, ["3000009904", "30000x0000", "3001000000", "3002000000", "3100000000"])
    assert await finals(sb, api, users) == {
        "+573000009904": "DELIVERED",  # magic 04
        "+5730000x0000": "INVALID_PHONE",
        "+573001000000": "DELIVERED",  # +573001, rate 0
        "+573002000000": "FAILURE_BY_SPAM_RATE_LIMIT",
        "+573100000000": "FAILURE_BY_TIER_CAPACITY",
    }


async def test_rules_apply_from_the_next_launch_until_cleared(sb: Sandbox, api: Any) -> None:
    users = colombians(api, numbers(50))
    before = (await api.send(users)).body
    await sb.fail_prefix("+57300", rate=1.0)
    assert set((await finals(sb, api, users)).values()) == {"FAILURE"}
    snapshot = await sb.snapshot(launch=before["launch_request_id"])
    assert {u["final_status"] for u in snapshot["companies"][0]["launches"][0]["users"]} == {
        "DELIVERED"
    }
    await sb.clear_failures()
    assert await sb.failures() == []
    assert set((await finals(sb, api, users)).values()) == {"DELIVERED"}


async def test_the_webhooks_see_it(sb: Sandbox, api: Any) -> None:
    calls: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        calls.append(await request.json())
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/hook", handle)
    async with serving(app) as url:
        await sb.set_webhook(f"{url}/hook", kinds=["delivered", "opt_out"])
        await sb.fail_prefix("+57300", rate=0.5, status=S.FAILURE_BY_OPTOUT_CONTACT)
        statuses = await finals(sb, api, colombians(api, numbers(40)))
        for _ in range(200):
            if len(calls) == 40:
                break
            await sb.set_clock(advance=5)
            await sb.now()
    events = [parse_event(body) for body in calls]
    by_kind = {
        kind: {f"{e.country_code}{e.cellphone}" for e in events if e.kind is kind}
        for kind in (EventKind.DELIVERED, EventKind.OPT_OUT)
    }
    assert by_kind[EventKind.OPT_OUT] == failing(statuses)
    assert by_kind[EventKind.DELIVERED] == set(statuses) - failing(statuses)
    assert 0 < len(failing(statuses)) < 40


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"rate": 0.3}, "prefix"),
        ({"prefix": "57300", "rate": 0.3}, "prefix"),
        ({"prefix": "+57 300", "rate": 0.3}, "prefix"),
        ({"prefix": 57300, "rate": 0.3}, "prefix"),
        ({"prefix": "+57300"}, "rate"),
        ({"prefix": "+57300", "rate": 1.5}, "rate"),
        ({"prefix": "+57300", "rate": -0.1}, "rate"),
        ({"prefix": "+57300", "rate": "0.3"}, "rate"),
        ({"prefix": "+57300", "rate": True}, "rate"),
        ({"prefix": "+57300", "rate": 0.3, "status": "DELIVERED"}, "status"),
        ({"prefix": "+57300", "rate": 0.3, "status": "RETRY"}, "status"),
        ({"prefix": "+57300", "rate": 0.3, "status": "FAILURE_BY_NOPE"}, "status"),
        ({"prefix": "+57300", "rate": 0.3, "seed": "1"}, "seed"),
        ({"prefix": "+57300", "rate": 0.3, "seed": 1.5}, "seed"),
        ({"prefix": "+57300", "rate": 0.3, "rat": 0.3}, "unknown field rat"),
        (["+57300", 0.3], "JSON object"),
    ],
)
async def test_bad_input_is_400_naming_the_field(sb: Sandbox, body: Any, field: str) -> None:
    with pytest.raises(aiohttp.ClientResponseError) as raised:
        await sb.admin("POST", "/failures", body)
    assert raised.value.status == 400
    assert field in raised.value.message
    assert await sb.failures() == []


async def test_the_helper_reports_the_field_too(sb: Sandbox) -> None:
    with pytest.raises(aiohttp.ClientResponseError, match="status must be a failure status"):
        await sb.fail_prefix("+57300", rate=0.3, status=S.DELIVERED)
