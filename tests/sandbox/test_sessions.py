"""Replies, webhooks, session updates and histories, listing, isolation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from helpers.servers import serving

from campaignkit.sandbox import Sandbox
from campaignkit.webhooks import EventKind, parse_event

pytestmark = pytest.mark.timeout(15)


class Receiver:
    """A real aiohttp webhook receiver on 127.0.0.1."""

    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.arrived = asyncio.Event()
        self.status = 200
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.calls.append(await request.json())
        self.arrived.set()
        return web.json_response({"ok": True}, status=self.status)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    async with serving(app) as url:
        receiver.url = f"{url}/hook"
        yield receiver


async def _delivered(api: Any, sb: Sandbox, *users: dict[str, Any]) -> str:
    ack = (await api.send(list(users))).body
    await sb.set_clock(advance=60)
    return str(ack["launch_request_id"])


async def test_reply_webhook_update_history_round_trip(
    api: Any, sb: Sandbox, receiver: Receiver
) -> None:
    await sb.set_webhook(receiver.url, kinds=["response"])
    launch_id = await _delivered(api, sb, api.user("5510001111", ("name", "Ana")))
    result = await sb.reply("5510001111", launch_request_id=launch_id, text="Sí")
    assert result["created"] is True
    assert result["webhook"]["status"] == 200
    session_id = result["session_external_id"]
    [call] = receiver.calls
    event = parse_event(call)
    assert (event.kind, event.session_id, event.answer) == (EventKind.RESPONSE, session_id, "Sí")
    # In WhatsApp's Mexican form, as the network reports the number.
    assert (event.country_code, event.cellphone) == ("+52", "15510001111")
    assert event.conversation_id == f"{launch_id}-0"
    assert call["user_session_keys"] == [{"key": "name", "value": "Ana", "type": None}]
    update = await api.call(
        "POST",
        f"{sb.base_url}/session/{session_id}/update",
        json={"user_session_keys": [{"key": "plan", "value": "gold"}]},
        key=None,
    )
    assert update.body == {"message": "Session updated.", "session_id": session_id}
    history = (await api.call("GET", f"{sb.base_url}/devapi/session/{session_id}/history")).body
    assert [(e["message"]["sender"], e["type"], e["message"]["type"]) for e in history] == [
        ("AI", "MESSAGE", "TEXT"),
        ("USER", "MESSAGE", "TEXT"),
        ("AI", "MESSAGE", "TEXT"),
    ]
    assert history[1]["message"]["text"] == "Sí"
    ai = history[0]["message"]
    assert ai["delivered_at"] is not None
    assert ai["read_at"] is not None
    assert ai["created_at"] <= ai["delivered_at"] <= ai["read_at"]
    # A second reply continues the session: one response call per answer.
    again = await sb.reply("5510001111", text="more")
    assert (again["session_external_id"], again["created"]) == (session_id, False)
    assert [call["actual_response"] for call in receiver.calls] == ["Sí", "more"]
    listing = (await api.call("GET", f"{sb.base_url}/devapi/poll/1001/sessions")).body
    assert session_id in [s["id"] for s in listing["results"]]


async def test_reply_before_delivery_is_409(api: Any, sb: Sandbox) -> None:
    await sb.set_clock(speed=1e-6)
    await api.send([api.user("5510001111")])
    answer = await api.call("POST", f"{sb.admin_url}/reply", json={"cellphone": "5510001111"})
    assert answer.status == 409
    unknown = await api.call("POST", f"{sb.admin_url}/reply", json={"cellphone": "000"})
    assert unknown.status == 404


async def test_failing_webhook_is_recorded_not_fatal(api: Any, sb: Sandbox) -> None:
    await sb.set_webhook("http://127.0.0.1:1/nowhere")
    await _delivered(api, sb, api.user("5510001111"))
    result = await sb.reply("5510001111")
    assert result["webhook"]["status"] is None
    assert result["webhook"]["error"]
    assert (await sb.snapshot())["companies"][0]["webhooks"][0]["error"]
    assert (await api.call("GET", f"{sb.base_url}/poll/api/all")).status == 200


@pytest.mark.parametrize(
    "sandbox_options", [{"reply_probability": 1.0, "reply_delay": 1.0, "seed": 3}]
)
async def test_spontaneous_replies_post_the_webhook(
    api: Any, sb: Sandbox, receiver: Receiver
) -> None:
    await sb.set_webhook(receiver.url, kinds=["response"])
    await api.send([api.user("5510001111"), api.user("5510009914")])  # 9914 never delivered
    await asyncio.wait_for(receiver.arrived.wait(), 5)
    await asyncio.sleep(0.2)
    assert [call["cellphone"] for call in receiver.calls] == ["15510001111"]  # WhatsApp's +52 1


async def test_session_pagination_25000(api: Any, sb: Sandbox) -> None:
    now = await sb.now()
    await sb.add_sessions(1002, 25_000, start=now - 86_400, end=now)
    url = f"{sb.base_url}/devapi/poll/1002/sessions"
    seen: list[str] = []
    times: list[str] = []
    cursor = ""
    pages = 0
    while True:
        params = {"limit": 10_000, **({"after": cursor} if cursor else {})}
        page = (await api.call("GET", url, params=params)).body
        seen += [s["id"] for s in page["results"]]
        times += [s["created_at"] for s in page["results"]]
        pages += 1
        cursor = page["next_id"]
        if not cursor:
            break
    assert pages == 3
    assert len(seen) == len(set(seen)) == 25_000 + 5  # plus the seeded sessions
    assert times == sorted(times)


async def test_session_listing_range_and_default_limit(api: Any, sb: Sandbox) -> None:
    now = int(await sb.now())
    await sb.add_sessions(1003, 1500, start=now - 3000, end=now - 1500)
    url = f"{sb.base_url}/devapi/poll/1003/sessions"
    default = (await api.call("GET", url)).body
    assert len(default["results"]) == 1000
    assert default["next_id"]
    ranged = (await api.call("GET", url, params={"since": now - 3000, "until": now - 2000})).body
    assert 990 <= len(ranged["results"]) <= 1001
    times = [s["created_at"] for s in ranged["results"]]
    assert times == sorted(times)
    last_year = (await api.call("GET", url, params={"since": 0, "until": 1})).body
    assert last_year == {"results": [], "next_id": ""}


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 10_001},
        {"limit": "x"},
        {"since": "yesterday"},
        {"since": 10, "until": 5},
        {"after": "!!!"},
    ],
)
async def test_session_listing_bad_query_is_400(
    api: Any, sb: Sandbox, params: dict[str, Any]
) -> None:
    answer = await api.call("GET", f"{sb.base_url}/devapi/poll/1001/sessions", params=params)
    assert (answer.status, sorted(answer.body)) == (400, ["error", "message"])


async def test_companies_are_isolated(api: Any, sb: Sandbox) -> None:
    other = await sb.add_company(name="Other")
    other_key = other["api_key"]
    other_poll = other["polls"][0]["id"]
    ack = (await api.send([api.user("5510001111")])).body
    launch_id = ack["launch_request_id"]
    # Company B sees none of company A's poll, launch or sessions...
    assert (await api.send([api.user("5510001111")], key=other_key)).status == 404
    assert (await api.status(launch_id, key=other_key)).status == 404
    history = f"{sb.base_url}/devapi/session/ses-1-0000000/history"
    assert (await api.call("GET", history, key=other_key)).status == 404
    sessions = f"{sb.base_url}/devapi/poll/1001/sessions"
    assert (await api.call("GET", sessions, key=other_key)).status == 404
    # ...and has its own.
    polls = (await api.call("GET", f"{sb.base_url}/poll/api/all", key=other_key)).body
    assert [p["id"] for p in polls] == [p["id"] for p in other["polls"]]
    assert (await api.send([api.user("5510001111")], poll_id=other_poll)).status == 404
    sent = await api.send([api.user("5510002222")], poll_id=other_poll, key=other_key)
    assert sent.status == 202
    snapshot = await sb.snapshot()
    counts = {c["company_id"]: c["phone_counts"] for c in snapshot["companies"]}
    assert counts == {
        sb.company_id: {"+525510001111": 1},
        other["company_id"]: {"+525510002222": 1},
    }
