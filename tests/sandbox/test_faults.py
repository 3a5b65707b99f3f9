"""Fault injection: every kind, per route and method, by rate and by count."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import orjson
import pytest

from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(10)


def _polls(sb: Sandbox) -> str:
    return f"{sb.base_url}/poll/api/all"


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_error_statuses_in_each_shape(api: Any, sb: Sandbox, status: int) -> None:
    await sb.set_faults({"kind": str(status)})
    answer = await api.call("GET", _polls(sb))
    assert (answer.status, sorted(answer.body)) == (status, ["error", "message"])
    answer = await api.status("any")
    assert (answer.status, list(answer.body)) == (status, ["detail"])
    assert "Retry-After" not in answer.headers


async def test_429_with_retry_after(api: Any, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "429", "retry_after": 2})
    answer = await api.call("GET", _polls(sb))
    assert (answer.status, answer.headers["Retry-After"]) == (429, "2")


async def test_latency_then_normal_answer(api: Any, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "latency", "seconds": 0.3})
    started = time.monotonic()
    answer = await api.call("GET", _polls(sb))
    assert answer.status == 200
    assert time.monotonic() - started >= 0.3


async def test_drop_closes_without_answer(sb: Sandbox) -> None:
    await sb.set_faults({"kind": "drop", "route": "list_polls"})
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await http.get(_polls(sb), headers={"Authorization": sb.api_key})


async def test_drop_mid_body(sb: Sandbox) -> None:
    await sb.set_faults({"kind": "drop_mid_body", "route": "list_polls"})
    async with (
        aiohttp.ClientSession() as http,
        http.get(_polls(sb), headers={"Authorization": sb.api_key}) as response,
    ):
        assert response.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()


@pytest.mark.parametrize(("status", "expected"), [(None, 502), (503, 503)])
async def test_html_error_page(api: Any, sb: Sandbox, status: int | None, expected: int) -> None:
    await sb.set_faults({"kind": "html", **({"status": status} if status else {})})
    answer = await api.call("GET", _polls(sb))
    assert answer.status == expected
    assert answer.headers["Content-Type"].startswith("text/html")
    assert answer.text.startswith("<html>")


async def test_truncated_json_is_half_the_real_body(api: Any, sb: Sandbox) -> None:
    real = (await api.call("GET", _polls(sb))).text
    await sb.set_faults({"kind": "truncated"})
    answer = await api.call("GET", _polls(sb))
    assert answer.status == 200
    assert answer.text == real[: len(real) // 2]
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(answer.text)


async def test_empty_body(api: Any, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "empty"})
    answer = await api.call("GET", _polls(sb))
    assert (answer.status, answer.text) == (200, "")


async def test_wrong_content_type(api: Any, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "wrong_content_type"})
    answer = await api.call("GET", _polls(sb))
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("text/plain")
    assert isinstance(orjson.loads(answer.text), list)


async def test_wrong_type(api: Any, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "wrong_type"})
    assert isinstance((await api.call("GET", _polls(sb))).body, dict)  # a list route
    assert isinstance((await api.status("x")).body, list)  # an object route


async def test_redirect_to_another_host(api: Any, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "redirect"})
    answer = await api.call("GET", _polls(sb))
    assert answer.status == 302
    assert answer.headers["Location"] == f"http://127.0.0.2:{sb.port}/main/poll/api/all"


async def test_fault_targets_route_and_method(api: Any, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "503", "route": "campaign_status", "method": "get"})
    ack = await api.send([api.user("5510001111")])
    assert ack.status == 202
    assert (await api.status(ack.body["launch_request_id"])).status == 503
    assert (await api.call("GET", _polls(sb))).status == 200
    await sb.set_faults({"kind": "503", "method": "POST"})
    assert (await api.status(ack.body["launch_request_id"])).status == 200
    assert (await api.send([api.user("5510001111")])).status == 503


async def test_count_then_recovers(api: Any, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "500", "count": 2})
    statuses = [(await api.call("GET", _polls(sb))).status for _ in range(4)]
    assert statuses == [500, 500, 200, 200]
    rule = (await sb.admin("GET", "/faults"))["faults"][0]
    assert (rule["remaining"], rule["fired"]) == (0, 2)


async def test_rate_is_reproducible_with_the_seed(api: Any, sb: Sandbox) -> None:
    async def pattern(seed: int) -> list[int]:
        await sb.set_faults({"kind": "503", "rate": 0.5}, seed=seed)
        return [(await api.call("GET", _polls(sb))).status for _ in range(40)]

    first = await pattern(7)
    assert await pattern(7) == first
    assert 5 < first.count(503) < 35
    assert await pattern(8) != first


@pytest.mark.parametrize(("when", "received"), [(None, 0), ("before", 0), ("after", 1)])
async def test_send_fault_before_or_after_processing(
    api: Any, sb: Sandbox, when: str | None, received: int
) -> None:
    await sb.set_faults(
        {"kind": "503", "route": "send_campaign", **({"when": when} if when else {})}
    )
    assert (await api.send([api.user("5510001111")])).status == 503
    assert (await sb.snapshot())["companies"][0]["received_users"] == received


async def test_drop_after_processing_records_the_send(sb: Sandbox, api: Any) -> None:
    await sb.set_faults({"kind": "drop", "route": "send_campaign", "when": "after"})
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await http.post(
                f"{sb.campaign_url}/v2/send-campaign/1001",
                json={"users": [api.user("5510001111")]},
                headers={"Authorization": sb.api_key},
            )
    assert (await sb.snapshot())["companies"][0]["phone_counts"] == {"+525510001111": 1}


async def test_clear_faults(api: Any, sb: Sandbox) -> None:
    await sb.set_faults({"kind": "500"})
    await sb.clear_faults()
    assert (await api.call("GET", _polls(sb))).status == 200
    assert (await sb.admin("GET", "/faults"))["faults"] == []


async def test_admin_routes_are_never_faulted(sb: Sandbox) -> None:
    await sb.set_faults({"kind": "500"})
    assert "companies" in await sb.snapshot(users=False)


@pytest.mark.parametrize(
    "rule",
    [
        {"kind": "418"},
        {"kind": "500", "route": "nope"},
        {"kind": "500", "rate": 2},
        {"kind": "500", "colour": "red"},
        {"kind": "500", "when": "later"},
        {},
    ],
)
async def test_invalid_fault_rules_are_400(api: Any, sb: Sandbox, rule: dict[str, Any]) -> None:
    answer = await api.call("PUT", f"{sb.admin_url}/faults", json={"faults": [rule]})
    assert answer.status == 400
    assert "invalid faults" in answer.body["message"]
