"""A template's status change on an admin request: the published ``hsm.status``
body POSTed to the company's ``template_status`` URL with its static headers,
read by a real receiver as the typed ``TEMPLATE_STATUS`` event."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from helpers.servers import serving

from campaignkit.sandbox import Sandbox
from campaignkit.webhooks import (
    EventKind,
    TemplateStatus,
    WebhookEvent,
    webhook_app,
    webhook_handler,
)

pytestmark = pytest.mark.timeout(20)

SECRET = "Bearer s3cret"
AT = datetime(2024, 9, 10, 12, 34, 56, 789000, tzinfo=UTC)
FROZEN = 1e-6  # a clock speed at which nothing moves unless advanced
PUBLISHED_FIELDS = [
    "event_id",
    "timestamp",
    "event_type",
    "status",
    "name",
    "affected_conversation_ids",
]


class Receiver:
    """A real ``webhook_app`` on 127.0.0.1, keeping the events it was given."""

    def __init__(self) -> None:
        self.events: list[WebhookEvent] = []
        self.url = ""

    def on_event(self, event: WebhookEvent) -> None:
        self.events.append(event)


@pytest.fixture(params=["webhook_app", "webhook_handler"])
async def receiver(request: pytest.FixtureRequest) -> AsyncIterator[Receiver]:
    """Both aiohttp mounts: the ready app, and the handler in one's own app."""
    receiver = Receiver()
    options: dict[str, Any] = {"secret": SECRET, "secret_header": "Authorization"}
    if request.param == "webhook_app":
        app = webhook_app(receiver.on_event, **options)
    else:
        app = web.Application()
        webhook_handler(receiver.on_event, **options).install(app, "/webhook")
    async with serving(app) as url:
        receiver.url = f"{url}/webhook"
        yield receiver


async def _hooked(sb: Sandbox, receiver: Receiver, secret: str = SECRET) -> None:
    await sb.set_webhook(receiver.url, kinds=["template_status"], headers={"Authorization": secret})
    await sb.set_clock(now=AT.timestamp(), speed=FROZEN)


@pytest.mark.parametrize("status", ["PAUSED", "DISABLED"])
async def test_the_receiver_reads_the_typed_event(
    sb: Sandbox, receiver: Receiver, status: Any
) -> None:
    await _hooked(sb, receiver)
    sent = await sb.change_template_status(
        "welcome_message", status, affected_conversation_ids=[12345, 67890]
    )
    assert list(sent["event"]) == PUBLISHED_FIELDS
    assert re.fullmatch(r"[0-9a-f]{24}", sent["event"]["event_id"])
    assert sent["event"]["timestamp"] == "2024-09-10T12:34:56.789Z"
    assert (sent["webhook"]["status"], sent["webhook"]["error"]) == (200, None)
    [event] = receiver.events
    assert event.kind is EventKind.TEMPLATE_STATUS
    assert event.template == TemplateStatus(
        name="welcome_message", status=status, affected_conversation_ids=("12345", "67890")
    )
    assert (event.event_id, event.occurred_at) == (sent["event"]["event_id"], AT)
    assert event.payload == sent["event"]
    calls = await sb.webhook_calls()
    assert [(c["kind"], c["url"], c["payload"]) for c in calls] == [
        ("template_status", receiver.url, sent["event"])
    ]


async def test_each_event_has_its_id_and_a_redelivery_is_handled_once(
    sb: Sandbox, receiver: Receiver
) -> None:
    await _hooked(sb, receiver)
    first = await sb.change_template_status("welcome_message", "PAUSED")
    second = await sb.change_template_status("welcome_message", "DISABLED")
    assert first["event"]["event_id"] != second["event"]["event_id"]
    again = await sb.change_template_status(
        "welcome_message", "DISABLED", event_id=second["event"]["event_id"]
    )
    assert again["webhook"]["status"] == 200
    assert [e.template.status for e in receiver.events if e.template] == ["PAUSED", "DISABLED"]


async def test_sent_with_the_static_headers_as_every_call(sb: Sandbox, receiver: Receiver) -> None:
    await _hooked(sb, receiver, secret="Bearer wrong")
    sent = await sb.change_template_status("welcome_message", "PAUSED")
    assert sent["webhook"]["status"] == 401
    assert receiver.events == []


async def test_only_the_company_url_for_template_status_gets_it(
    sb: Sandbox, receiver: Receiver
) -> None:
    sent = await sb.change_template_status("welcome_message", "PAUSED")
    assert sent["webhook"] is None
    # A poll's URLs are its flows'; the event is the account's.
    await sb.set_webhook(receiver.url, poll_id=1001)
    # Every other kind of the company, not this one.
    others = ["response", "delivered", "read", "opt_out", "conversation_closed"]
    await sb.set_webhook(receiver.url, kinds=others)
    assert (await sb.change_template_status("welcome_message", "PAUSED"))["webhook"] is None
    other = await sb.add_company()
    await sb.set_webhook(receiver.url, company=other["company_id"])
    assert (await sb.change_template_status("welcome_message", "PAUSED"))["webhook"] is None
    sent = await sb.change_template_status("promo", "PAUSED", company=other["company_id"])
    assert sent["webhook"]["status"] == 401  # the other company sends no secret header
    assert await sb.webhook_calls() == []


async def test_the_sandbox_url_for_every_kind_includes_it(sb: Sandbox) -> None:
    hits: list[Any] = []

    async def handle(request: web.Request) -> web.Response:
        hits.append(await request.json())
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/all", handle)
    async with serving(app) as url:
        await sb.set_webhook(f"{url}/all")
        await sb.change_template_status("welcome_message", "REJECTED")
    assert [hit["status"] for hit in hits] == ["REJECTED"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"status": "PAUSED"}, "name"),
        ({"name": " ", "status": "PAUSED"}, "name"),
        ({"name": "t", "status": "paused"}, "status"),
        ({"name": "t"}, "status"),
        ({"name": "t", "status": "PAUSED", "affected_conversation_ids": ["1"]}, "affected"),
        ({"name": "t", "status": "PAUSED", "affected_conversation_ids": [True]}, "affected"),
        ({"name": "t", "status": "PAUSED", "event_id": ""}, "event_id"),
        ({"name": "t", "status": "PAUSED", "reason": "LOW_QUALITY"}, "unknown field reason"),
    ],
)
async def test_bad_input_is_400_naming_the_field(
    sb: Sandbox, body: dict[str, Any], field: str
) -> None:
    with pytest.raises(aiohttp.ClientResponseError) as raised:
        await sb.admin("POST", f"/companies/{sb.company_id}/template-status", body)
    assert raised.value.status == 400
    assert field in raised.value.message
    assert await sb.webhook_calls() == []


async def test_unknown_company_is_404(sb: Sandbox) -> None:
    with pytest.raises(aiohttp.ClientResponseError) as raised:
        await sb.change_template_status("t", "PAUSED", company="company-99")
    assert (raised.value.status, raised.value.message) == (404, "company company-99 not found")


async def test_a_failing_receiver_never_breaks_the_sandbox(sb: Sandbox) -> None:
    await sb.set_webhook("http://127.0.0.1:9/hook", kinds=["template_status"])
    sent = await sb.change_template_status("welcome_message", "PAUSED")
    assert sent["webhook"]["status"] is None
    assert sent["webhook"]["error"]
    await asyncio.wait_for(sb.now(), 5)
