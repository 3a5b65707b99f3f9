"""Input hardening against the real sandbox (the pure checks are in
tests/test_sansio.py and tests/test_client.py): path parameters cannot reach
another route, and answers larger than ``max_response_bytes`` are refused."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from helpers.servers import serving

from campaignkit import (
    AmbiguousSendError,
    CampaignClient,
    NotFoundError,
    ResponseError,
    User,
    ValidationError,
)
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(30)

USER = [User(cellphone="5540001234", country_code="+52")]
NASTY = [
    "../../poll/api/all",
    "..%2F..%2Fpoll%2Fapi%2Fall",
    "x/../../../agent/agent/company/agents",
    "a/b",
    "x?next_id=1&limit=5",
    "x#fragment",
    "%2e%2e",
    "...",
    " spaced out ",
    "ñandú/✓",
    "x;y=1",
    "x\\..\\y",
]
CONTROL = ["x\n", "x\r\nAuthorization: stolen", "\x00", "x\x7f", "\t"]

Call = Callable[[CampaignClient, str], Awaitable[Any]]
CALLS: dict[str, tuple[str, Call]] = {
    "launch_request_id": ("campaign_status", lambda c, v: c.get_campaign_status(v)),
    "session_id": ("session_history", lambda c, v: c.get_session_history(v)),
    "session_external_id": (
        "update_session",
        lambda c, v: c.update_session(v, {"a": "b"}),
    ),
    "poll_id (sessions)": ("list_sessions", lambda c, v: c.list_sessions(v)),
    "poll_id (send)": ("send_campaign", lambda c, v: c.send_campaign(v, USER)),
}


async def _requests(sb: Sandbox) -> dict[str, int]:
    counts: dict[str, int] = (await sb.admin("GET", "/faults"))["requests"]
    return counts


@pytest.mark.parametrize("param", sorted(CALLS))
async def test_path_params_stay_in_their_segment(sb: Sandbox, param: str) -> None:
    route, invoke = CALLS[param]
    async with sb.client(max_retries=0) as client:
        for value in NASTY:
            before = await _requests(sb)
            with pytest.raises(NotFoundError) as caught:
                await invoke(client, value)
            after = await _requests(sb)
            # Exactly one request, on the intended route, and nowhere else.
            assert {k: after.get(k, 0) - before.get(k, 0) for k in after} == {
                **{k: 0 for k in after},
                route: 1,
            }, value
            # The sandbox decoded the whole value as the one id it looked for.
            said = caught.value.detail or caught.value.message or ""
            assert value.strip() in said, (value, said)
    assert (await sb.snapshot())["companies"][0]["received_users"] == 0


@pytest.mark.parametrize("param", sorted(CALLS))
async def test_control_characters_are_refused_before_any_request(sb: Sandbox, param: str) -> None:
    _, invoke = CALLS[param]
    before = await _requests(sb)
    async with sb.client() as client:
        for value in CONTROL:
            with pytest.raises(ValidationError, match="control characters"):
                await invoke(client, value)
    assert await _requests(sb) == before


async def test_answer_over_the_size_cap_is_a_response_error(sb: Sandbox) -> None:
    await sb.add_sessions(1001, 200)
    async with sb.client(max_response_bytes=4096) as client:
        assert await client.list_polls()  # small answers pass
        before = await _requests(sb)
        with pytest.raises(ResponseError, match="max_response_bytes=4096"):
            await client.list_sessions(1001)
        after = await _requests(sb)
        assert after["list_sessions"] - before.get("list_sessions", 0) == 1  # not retried
        assert len((await client.list_sessions(1001, limit=2)).results) == 2  # pool still fine


async def test_streamed_answer_over_the_cap_is_refused_and_a_send_is_ambiguous() -> None:
    """No Content-Length (chunked): the cap applies while reading."""
    hits: list[str] = []

    async def endless(request: web.Request) -> web.StreamResponse:
        hits.append(request.method)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(b"[" + b'{"id": 1, "name": "p"},' * 20_000)
        await response.write(b'{"id": 2, "name": "q"}]')
        return response

    app = web.Application()
    app.router.add_get("/poll/api/all", endless)
    app.router.add_post("/v2/send-campaign/{poll}", endless)
    async with serving(app) as url:
        async with CampaignClient(
            "key", base_url=url, campaign_url=url, max_response_bytes=64 * 1024
        ) as client:
            with pytest.raises(ResponseError, match="exceeds max_response_bytes"):
                await client.list_polls()
            with pytest.raises(AmbiguousSendError) as caught:
                await client.send_campaign(1, USER)
            assert isinstance(caught.value.cause, ResponseError)
        async with CampaignClient("key", base_url=url) as client:
            assert len(await client.list_polls()) == 20_001  # the default cap takes it
    assert hits == ["GET", "POST", "GET"]
