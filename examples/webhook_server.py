"""Answer a flow's question from your backend, and assign agents.

    python examples/webhook_server.py            # sandbox: full round trip, then exit
    python examples/webhook_server.py --serve    # keep serving (real service)

Routes (one aiohttp app):
  POST /webhook  the flow asks for an id number; the answer to that question
                 is checked here and answered within the service's 10 s as
                 the session variable server_user_valid (yes/no), which the
                 flow branches on
  POST /assign   assignment endpoint: answers {"agent_id": <id>} round robin
                 among the active agents tagged ASSIGN_TAG (if set)

Set WEBHOOK_SECRET to require it: configure the service's "Webhook Headers"
as {"X-Webhook-Secret": "<the same value>"}. Without CAMPAIGNKIT_API_KEY an
in-process sandbox is used: the example gives a poll the id-number flow,
points its response webhook here, sends a campaign, has the user answer, and
prints the variable the sandbox merged into the session.
"""

from __future__ import annotations

import asyncio
import os
import sys

from aiohttp import web

from campaignkit import CampaignClient, User
from campaignkit.webhooks import AgentPicker, EventKind, WebhookEvent, webhook_handler

PORT = int(os.environ.get("PORT", "0" if not os.environ.get("CAMPAIGNKIT_API_KEY") else "8080"))
ID_QUESTION = "What is your id number?"


def valid_id_number(text: str) -> bool:
    """A stand-in for your backend's check: 6 to 10 digits."""
    digits = text.replace(".", "").replace(" ", "")
    return digits.isdigit() and 6 <= len(digits) <= 10


async def on_event(event: WebhookEvent) -> dict[str, str] | None:
    """Answer the id-number question; other events need no answer."""
    question = event.payload.get("question")
    asked = question.get("text") if isinstance(question, dict) else None
    if event.kind is not EventKind.RESPONSE or asked != ID_QUESTION:
        return None
    valid = valid_id_number(event.answer or "")
    print(f"webhook: session {event.session_id} answered the id question: valid={valid}")
    return {"server_user_valid": "yes" if valid else "no"}


def build_app(client: CampaignClient) -> web.Application:
    app = web.Application()
    webhook = webhook_handler(
        on_event,
        kinds={EventKind.RESPONSE},
        secret=os.environ.get("WEBHOOK_SECRET") or None,
        client=client,  # keys returned after the deadline go out by update_session
    )
    webhook.install(app, "/webhook")
    picker = AgentPicker(client, tag=os.environ.get("ASSIGN_TAG"), ttl=60)
    app.router.add_post("/assign", picker.handler())
    return app


async def serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", PORT).start()
    return runner, runner.addresses[0][1]


async def real_service() -> None:
    async with CampaignClient() as client:
        runner, port = await serve(build_app(client))
        print(f"serving http://127.0.0.1:{port}/webhook and /assign (Ctrl-C to stop)")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()


async def sandbox_round_trip() -> None:
    import aiohttp

    from campaignkit.sandbox import Sandbox

    async with Sandbox(speed=50) as sb, sb.client() as client:
        runner, port = await serve(build_app(client))
        try:
            poll_id = (await client.list_polls())[0].id
            await sb.set_flow(poll_id, [ID_QUESTION, "Thanks! Anything else?"])
            secret = os.environ.get("WEBHOOK_SECRET")
            await sb.set_webhook(
                f"http://127.0.0.1:{port}/webhook",
                kinds=["response"],
                headers={"X-Webhook-Secret": secret} if secret else {},
            )
            print(f"webhook registered with the sandbox: http://127.0.0.1:{port}/webhook")

            user = User(cellphone="3005550101", country_code="+57")
            ack = await client.send_campaign(poll_id, [user])
            async for _ in client.track(ack, until="settled", poll_interval=0.1, timeout=60):
                pass
            answer = await sb.reply(user.cellphone, text="1.020.304.050")
            call = answer["webhook"]  # the sandbox's call to /webhook, as it recorded it
            print(f"webhook call: {call['status']} in {call['seconds']} s, merged {call['keys']}")
            session = await sb.session(answer["session_external_id"])
            print(f"session variables: {session['keys']}")
            history = await client.get_session_history(answer["session_external_id"])
            print(f"history: {[entry.message.text for entry in history]}")

            async with aiohttp.ClientSession() as http:
                for _ in range(2):
                    async with http.post(f"http://127.0.0.1:{port}/assign", json={}) as resp:
                        print(f"assign -> {resp.status} {await resp.json()}")
        finally:
            await runner.cleanup()


if __name__ == "__main__":
    if os.environ.get("CAMPAIGNKIT_API_KEY") or "--serve" in sys.argv:
        asyncio.run(real_service())
    else:
        asyncio.run(sandbox_round_trip())
