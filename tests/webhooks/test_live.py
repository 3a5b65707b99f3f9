"""A FastAPI app under uvicorn, on a real port, receiving the sandbox's real
webhook calls: its answers merged into the session, late keys sent back by
update_session, the conversation closed event read with its session."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from starlette.routing import Route

from campaignkit.sandbox import Sandbox
from campaignkit.webhooks import ASGIReceiver, EventKind, WebhookEvent, asgi_app

pytestmark = pytest.mark.timeout(30)


@contextlib.asynccontextmanager
async def uvicorn_serving(receiver: ASGIReceiver) -> AsyncIterator[str]:
    """A FastAPI app routing ``POST /webhook`` to ``receiver`` (closed by the
    app's lifespan), under uvicorn on a free loopback port; yields its URL."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await receiver.aclose()

    app = FastAPI(routes=[Route("/webhook", receiver, methods=["POST"])], lifespan=lifespan)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not serving.done(), serving
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/webhook"
    finally:
        server.should_exit = True
        await serving
        sock.close()


async def test_a_fastapi_app_under_uvicorn_answers_the_sandboxs_calls(
    api: Any, sb: Sandbox
) -> None:
    events: list[WebhookEvent] = []

    async def on_event(event: WebhookEvent) -> dict[str, str] | None:
        events.append(event)
        if event.kind is not EventKind.RESPONSE:
            return None
        if event.answer == "later":  # past the deadline: sent by update_session
            await asyncio.sleep(0.6)
            return {"checked_later": "yes"}
        return {"server_user_valid": "yes" if event.answer == "12345678" else "no"}

    async with sb.client() as client:
        receiver = asgi_app(
            on_event,
            secret="Bearer s3cret",
            secret_header="Authorization",
            deadline=0.3,
            client=client,
        )
        async with uvicorn_serving(receiver) as url:
            await sb.set_flow(1001, ["Your id number?", "Anything else?", "Bye?"])
            await sb.set_webhook(url, headers={"Authorization": "Bearer s3cret"})
            await api.send([api.user("5510001111")])
            await sb.set_clock(advance=60)
            first = await sb.reply("5510001111", text="12345678")
            assert first["webhook"]["status"] == 200
            assert first["webhook"]["keys"] == {"server_user_valid": "yes"}
            session_id = first["session_external_id"]
            late = await sb.reply("5510001111", text="later")
            assert (late["webhook"]["status"], late["webhook"]["keys"]) == (200, {})
            for _ in range(100):
                if "checked_later" in (await sb.session(session_id))["keys"]:
                    break
                await asyncio.sleep(0.05)
            last = await sb.reply("5510001111", text="no")
            assert last["closed"]["status"] == 200
        calls = await sb.webhook_calls()
    assert (await sb.session(session_id))["keys"] == {
        "server_user_valid": "no",
        "checked_later": "yes",
    }
    assert {call["status"] for call in calls} == {200}
    closed = events[-1]
    assert (closed.kind, closed.session_id) == (EventKind.CONVERSATION_CLOSED, session_id)
    answers = [e.answer for e in events if e.kind is EventKind.RESPONSE]
    assert answers == ["12345678", "later", "no"]
    assert {EventKind.DELIVERED, EventKind.READ} <= {e.kind for e in events}
