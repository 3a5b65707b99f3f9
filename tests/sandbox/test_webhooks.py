"""The sandbox's webhooks: the published bodies per kind to per-kind URLs with
static headers, answers merged into the session, calls recorded, 10 s rule."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from helpers.servers import serving

from campaignkit import DeploymentStatus
from campaignkit.sandbox import Sandbox
from campaignkit.sandbox._config import SandboxConfig
from campaignkit.sandbox._outcomes import STATUSES
from campaignkit.webhooks import EventKind, parse_event

pytestmark = pytest.mark.timeout(20)

OPT_OUT_PHONE = f"55100099{STATUSES.index(DeploymentStatus.FAILURE_BY_OPTOUT_CONTACT):02d}"


class Hook:
    """A real receiver recording bodies and headers, answering ``answer``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.answer: Any = {}
        self.delay = 0.0
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.calls.append((request.path, body, dict(request.headers)))
        if self.delay:
            await asyncio.sleep(self.delay)
        return web.json_response(self.answer)

    def kinds(self) -> list[EventKind]:
        return [parse_event(body).kind for _, body, _ in self.calls]


@pytest.fixture
async def hook() -> AsyncIterator[Hook]:
    hook = Hook()
    app = web.Application()
    app.router.add_post("/{kind}", hook.handle)
    async with serving(app) as url:
        hook.url = url
        yield hook


async def _settle(sb: Sandbox, hook: Hook, count: int) -> None:
    for _ in range(200):
        if len(hook.calls) >= count:
            return
        await sb.set_clock(advance=5)
        await asyncio.sleep(0.02)
    raise AssertionError(f"{len(hook.calls)} calls, wanted {count}")


async def test_each_kind_goes_to_its_url_with_the_static_headers(
    api: Any, sb: Sandbox, hook: Hook
) -> None:
    urls = {kind: f"{hook.url}/{kind}" for kind in ("delivered", "read", "response")}
    await sb.set_webhook(urls=urls, headers={"Authorization": "Bearer s3cret"})
    await api.send([api.user("5510001111", ("name", "Ana"))])
    await _settle(sb, hook, 2)
    assert hook.kinds() == [EventKind.DELIVERED, EventKind.READ]
    await sb.reply("5510001111", text="hola")
    assert hook.kinds()[-1] is EventKind.RESPONSE
    assert [path for path, _, _ in hook.calls] == ["/delivered", "/read", "/response"]
    assert {headers["Authorization"] for _, _, headers in hook.calls} == {"Bearer s3cret"}
    sessions = {parse_event(body).session_id for _, body, _ in hook.calls}
    assert len(sessions) == 1
    assert None not in sessions
    calls = await sb.webhook_calls()
    assert [(c["kind"], c["status"]) for c in calls] == [
        ("delivered", 200),
        ("read", 200),
        ("response", 200),
    ]


async def test_a_200_answer_is_merged_into_the_session(api: Any, sb: Sandbox, hook: Hook) -> None:
    await sb.set_flow(1001, ["What is your id number?", "Anything else?"])
    await sb.set_webhook(f"{hook.url}/all", kinds=["response", "conversation_closed"])
    hook.answer = {"user_session_keys": [{"key": "server_user_valid", "value": "yes"}]}
    await api.send([api.user("5510001111")])
    await sb.set_clock(advance=60)
    first = await sb.reply("5510001111", text="12345678")
    assert first["webhook"]["keys"] == {"server_user_valid": "yes"}
    assert first["closed"] is None
    session = await sb.session(first["session_external_id"])
    assert session["keys"] == {"server_user_valid": "yes"}
    texts = [entry["message"]["text"] for entry in session["history"]]
    # the service merges the answer before the flow goes on (it may branch on it)
    assert texts == [
        "What is your id number?",
        "12345678",
        "(variables set: server_user_valid)",
        "Anything else?",
    ]
    assert session["history"][2]["message"]["extra"] == {
        "user_session_keys": [{"key": "server_user_valid", "value": "yes"}]
    }
    hook.answer = {}
    second = await sb.reply("5510001111", text="no")
    assert second["closed"]["status"] == 200
    closed = parse_event(second["closed"]["payload"])
    assert (closed.kind, closed.session_id) == (
        EventKind.CONVERSATION_CLOSED,
        first["session_external_id"],
    )
    assert closed.keys == {"server_user_valid": "yes"}
    asked = [parse_event(body).payload["question"]["text"] for _, body, _ in hook.calls[:2]]
    assert asked == ["What is your id number?", "Anything else?"]


async def test_merged_keys_keep_the_type_the_answer_gives(
    api: Any, sb: Sandbox, hook: Hook
) -> None:
    await sb.set_flow(1001, ["Where are you?", "Anything else?"])
    await sb.set_webhook(f"{hook.url}/all", kinds=["response"])
    where = '{"latitude": 4.59, "longitude": -72.03, "address": "Carrera 7"}'
    typed = {"key": "loc", "value": where, "type": "location"}
    hook.answer = {"user_session_keys": [typed, {"key": "name", "value": "Juan", "type": None}]}
    await api.send([api.user("5510001111")])
    await sb.set_clock(advance=60)
    first = await sb.reply("5510001111", text="here")
    session_id = first["session_external_id"]
    session = await sb.session(session_id)
    assert (session["keys"], session["types"]) == (
        {"loc": where, "name": "Juan"},
        {"loc": "location"},
    )
    assert session["history"][2]["message"]["extra"] == {
        "user_session_keys": [typed, {"key": "name", "value": "Juan"}]
    }
    hook.answer = {}
    await sb.reply("5510001111", text="no")
    sent = parse_event(hook.calls[-1][1]).user_session_keys
    assert [(k.key, k.type) for k in sent] == [("loc", "location"), ("name", None)]
    url = f"{sb.base_url}/session/{session_id}/update"
    await api.call("POST", url, json={"user_session_keys": [{"key": "loc", "value": "moved"}]})
    assert (await sb.session(session_id))["types"] == {}


async def test_opt_out_numbers_send_the_opt_out_event(api: Any, sb: Sandbox, hook: Hook) -> None:
    await sb.set_webhook(f"{hook.url}/all")
    await api.send([api.user(OPT_OUT_PHONE)])
    await _settle(sb, hook, 1)
    assert hook.kinds() == [EventKind.OPT_OUT]
    # In WhatsApp's Mexican form, as the network reports the number.
    assert parse_event(hook.calls[0][1]).cellphone == "1" + OPT_OUT_PHONE


async def test_a_poll_has_its_own_webhooks(api: Any, sb: Sandbox, hook: Hook) -> None:
    await sb.set_webhook(f"{hook.url}/company", kinds=["response"])
    await sb.set_webhook(f"{hook.url}/poll", kinds=["response"], poll_id=1002)
    await api.send([api.user("5510001111")], poll_id=1001)
    await api.send([api.user("5510002222")], poll_id=1002)
    await sb.set_clock(advance=60)
    await sb.reply("5510001111")
    await sb.reply("5510002222")
    assert [path for path, _, _ in hook.calls] == ["/company", "/poll"]


@pytest.mark.parametrize("sandbox_options", [{"webhook_timeout": 0.3}])
async def test_a_slow_answer_is_given_up(api: Any, sb: Sandbox, hook: Hook) -> None:
    assert SandboxConfig().webhook_timeout == 10.0  # the service's rule
    hook.delay, hook.answer = 1.0, {"user_session_keys": [{"key": "late", "value": "1"}]}
    await sb.set_webhook(f"{hook.url}/all", kinds=["response"])
    await api.send([api.user("5510001111")])
    await sb.set_clock(advance=60)
    result = await sb.reply("5510001111")
    assert result["webhook"]["status"] is None
    assert "Timeout" in result["webhook"]["error"]
    assert (await sb.session(result["session_external_id"]))["keys"] == {}


async def test_bad_webhook_settings_are_400(sb: Sandbox) -> None:
    for body in (
        {"url": "ftp://x"},
        {"urls": {"nope": "http://x"}},
        {"kinds": ["nope"], "url": "http://x"},
        {"headers": {"a": 1}},
    ):
        with pytest.raises(Exception, match="400"):
            await sb.admin("PUT", f"/companies/{sb.company_id}/webhook", body)
