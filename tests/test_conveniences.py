"""The conveniences of DESIGN.md: default and extra headers (never the auth
header), the proxy environment, the raw answers of any call and opt-in body
logging with phones masked and the key redacted. Over the I/O seam's fake and
over real HTTP (a local echo server, a local proxy, the sandbox)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from aiohttp import web
from helpers.servers import serving
from multidict import CIMultiDict

from campaignkit import (
    CampaignClient,
    ConfigurationError,
    ConnectionError,
    NotFoundError,
    User,
    ValidationError,
)
from campaignkit.sandbox import Sandbox
from campaignkit.testing import Answer, FakeTime, MockExchange

KEY = "sk_tst_conveniences_0123456789"
BASE = "https://main.test"
POLLS = [{"id": 1, "name": "One"}]
ACK = {
    "message": "queued",
    "id": "1",
    "batch_id": "b1",
    "launch_request_id": "L1",
    "status_url": "/v2/send-campaign/L1",
}
ANA = User(country_code="+57", cellphone="3001234567", user_session_keys={"name": "Ana"})


def polls_exchange() -> MockExchange:
    return MockExchange({"GET /poll/api/all": Answer.json(POLLS)})


# -- headers -------------------------------------------------------------------------


async def test_default_and_extra_headers_reach_the_server_with_the_key() -> None:
    seen: list[CIMultiDict[str]] = []

    async def echo(request: web.Request) -> web.Response:
        seen.append(request.headers.copy())
        return web.json_response(POLLS)

    app = web.Application()
    app.router.add_get("/poll/api/all", echo)
    async with (
        serving(app) as url,
        CampaignClient(
            KEY, base_url=url, default_headers={"X-Tenant": "acme", "User-Agent": "mine/1"}
        ) as client,
    ):
        await client.list_polls(extra_headers={"X-Request-Id": "r-1", "X-Tenant": "other"})
        await client.list_polls()
    assert seen[0]["X-Tenant"] == "other"  # the call's header wins over the default
    assert seen[0]["X-Request-Id"] == "r-1"
    assert seen[0]["User-Agent"] == "mine/1"
    assert seen[0]["Authorization"] == KEY
    assert seen[1]["X-Tenant"] == "acme"
    assert "X-Request-Id" not in seen[1]


@pytest.mark.parametrize("name", ["Authorization", "authorization", "AUTHORIZATION"])
async def test_no_header_can_replace_the_key(name: str) -> None:
    with pytest.raises(ConfigurationError, match="default_headers"):
        CampaignClient(KEY, base_url=BASE, default_headers={name: "stolen"})
    exchange = polls_exchange()
    async with CampaignClient(KEY, base_url=BASE, exchange=exchange) as client:
        with pytest.raises(ValidationError, match="extra_headers") as caught:
            await client.list_polls(extra_headers={name: "stolen"})
    assert exchange.requests == []  # refused before anything was sent
    assert caught.value.problems[0][0] == f"extra_headers[{name!r}]"


async def test_a_custom_auth_header_is_protected_too() -> None:
    client = CampaignClient(KEY, base_url=BASE, auth_header="X-Api-Key", exchange=polls_exchange())
    async with client:
        with pytest.raises(ValidationError, match="API key"):
            await client.list_polls(extra_headers={"x-api-key": "other"})
        await client.list_polls(extra_headers={"Authorization": "Basic abc"})


@pytest.mark.parametrize(
    "headers",
    [{"X-A": "1\r\nX-Injected: 1"}, {"Bad Name": "1"}, {"X-A": "\x00"}, {"": "x"}],
)
async def test_headers_that_could_split_a_request_are_refused(headers: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError):
        CampaignClient(KEY, base_url=BASE, default_headers=headers)
    exchange = polls_exchange()
    async with CampaignClient(KEY, base_url=BASE, exchange=exchange) as client:
        with pytest.raises(ValidationError):
            await client.send_campaign(1, [ANA], extra_headers=headers)
    assert exchange.requests == []


# -- the proxy environment --------------------------------------------------------------


@pytest.mark.parametrize("trust_env", [True, False])
async def test_the_proxy_environment_is_honoured_unless_trust_env_is_false(
    monkeypatch: pytest.MonkeyPatch, trust_env: bool
) -> None:
    proxied: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        proxied.append(str(request.url))
        return web.json_response(POLLS)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", proxy)
    async with serving(app) as proxy_url:
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        # A host that does not resolve: only the proxy can answer for it.
        options: dict[str, Any] = {"trust_env": trust_env, "max_retries": 0}
        async with CampaignClient(KEY, base_url="http://service.invalid", **options) as client:
            if trust_env:
                assert [poll.id for poll in await client.list_polls()] == [1]
            else:
                with pytest.raises(ConnectionError):
                    await client.list_polls()
    assert proxied == (["http://service.invalid/poll/api/all"] if trust_env else [])


# -- raw answers ------------------------------------------------------------------------


async def test_raw_answers_hold_every_answer_of_the_block_retries_and_errors_included() -> None:
    exchange = MockExchange(
        {
            "GET /poll/api/all": [
                Answer.json({"detail": "busy"}, status=503, headers={"Retry-After": "1"}),
                Answer.json(POLLS, headers={"X-Rate-Remaining": "9"}),
            ]
        }
    )
    client = FakeTime().install(CampaignClient(KEY, base_url=BASE, exchange=exchange))
    async with client:
        await client.list_polls()  # outside the block: not recorded
        with client.raw_answers() as answers:
            polls = await client.list_polls()
            with pytest.raises(NotFoundError):
                await client.get_session_history("s-1")
    assert [poll.id for poll in polls] == [1]
    assert [(a.call, a.status) for a in answers] == [("list_polls", 200), ("session_history", 404)]
    assert answers[0].headers["x-rate-remaining"] == "9"
    assert answers[0].json() == POLLS
    assert answers[1].url == f"{BASE}/devapi/session/s-1/history"
    assert KEY not in repr(answers)


async def test_a_retried_call_shows_each_answer() -> None:
    exchange = MockExchange(
        {"GET /poll/api/all": [Answer.json({}, status=502), Answer.json(POLLS)]}
    )
    async with FakeTime().install(CampaignClient(KEY, base_url=BASE, exchange=exchange)) as client:
        with client.raw_answers() as answers:
            await client.list_polls()
    assert [a.status for a in answers] == [502, 200]


async def test_concurrent_blocks_record_their_own_answers() -> None:
    async def answer(request: Any) -> Answer:
        await asyncio.sleep(0.01)
        return Answer.json(POLLS if "poll" in request.url else [])

    async with CampaignClient(
        KEY, base_url=BASE, agent_url=BASE, exchange=MockExchange(answer)
    ) as client:

        async def recorded(call: Any) -> list[str]:
            with client.raw_answers() as answers:
                await asyncio.gather(call(), call())
            return [a.call for a in answers]

        polls, agents = await asyncio.gather(
            recorded(client.list_polls), recorded(client.list_agents)
        )
    assert polls == ["list_polls", "list_polls"]
    assert agents == ["list_agents", "list_agents"]


async def test_raw_answers_over_real_http(sb: Sandbox) -> None:
    async with sb.client() as client:
        with client.raw_answers() as answers:
            ack = await client.send_campaign(1001, [ANA])
    [raw] = answers
    assert raw.status == 202
    assert raw.headers["Content-Type"].startswith("application/json")
    assert raw.json()["launch_request_id"] == ack.launch_request_id


# -- body logging ------------------------------------------------------------------------


async def test_bodies_are_logged_only_when_asked_with_phones_masked_and_the_key_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def echo_key(request: Any) -> Answer:
        # A gateway that echoes the key and the phone back.
        return Answer.json({**ACK, "message": f"{KEY} queued 3001234567"}, status=202)

    caplog.set_level(logging.DEBUG, logger="campaignkit")
    for log_bodies in (False, True):
        async with CampaignClient(
            KEY,
            base_url=BASE,
            campaign_url=BASE,
            exchange=MockExchange(echo_key),
            log_bodies=log_bodies,
        ) as client:
            await client.send_campaign(7, [ANA])
    lines = [r.getMessage() for r in caplog.records if "/v2/send-campaign" in r.getMessage()]
    assert len(lines) == 2
    assert "request=" not in lines[0]
    logged = lines[1]
    assert "request=" in logged
    assert "answer=" in logged
    assert '"country_code":"+57"' in logged  # what is not a phone is shown
    assert "Ana" in logged
    assert "********67" in logged
    assert "3001234567" not in logged
    assert "1234567" not in logged
    assert KEY not in logged


async def test_a_body_that_is_not_json_is_masked_as_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exchange = MockExchange(
        {"GET /poll/api/all": Answer(502, {}, b"<html>bad gateway for +57 300 123 4567</html>")}
    )
    caplog.set_level(logging.DEBUG, logger="campaignkit")
    client = CampaignClient(KEY, base_url=BASE, exchange=exchange, log_bodies=True, max_retries=0)
    async with client:
        with pytest.raises(Exception, match="502"):
            await client.list_polls()
    [line] = [r.getMessage() for r in caplog.records if "answer=" in r.getMessage()]
    assert "300 123 4567" not in line
    assert "+** *** *** **67" in line
