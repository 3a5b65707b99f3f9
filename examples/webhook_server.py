"""Serve the first-reply webhook and the agent-assignment endpoint.

    python examples/webhook_server.py            # sandbox: full round trip, then exit
    python examples/webhook_server.py --serve    # keep serving (real service)

Routes (one aiohttp app):
  POST /webhook  first reply: update the session, continue the conversation
  POST /assign   assignment endpoint: answers {"agent_id": <id>} round robin
                 among the active agents tagged ASSIGN_TAG (if set)

Set WEBHOOK_SECRET to require it in the X-Webhook-Secret header (or the
?token= query parameter, for platforms that only take a URL). Without
CAMPAIGNKIT_API_KEY an in-process sandbox is used: the example registers its
webhook there, sends a campaign, has a user reply, and exits once the webhook
was handled.
"""

from __future__ import annotations

import asyncio
import os
import sys

from aiohttp import web

from campaignkit import CampaignClient, User
from campaignkit.webhooks import AgentPicker, ReplyEvent, first_reply_handler

PORT = int(os.environ.get("PORT", "0" if not os.environ.get("CAMPAIGNKIT_API_KEY") else "8080"))


def build_app(client: CampaignClient, handled: asyncio.Queue[ReplyEvent]) -> web.Application:
    async def on_reply(event: ReplyEvent) -> None:
        # Runs in the background: the service already got its 202.
        name = event.keys.get("name", "there")
        await client.update_session(event.session_external_id, {"greeting": f"Hi {name}!"})
        print(f"webhook: session {event.session_external_id} updated ({event.keys})")
        await handled.put(event)

    app = web.Application()
    webhook = first_reply_handler(
        on_reply, secret=os.environ.get("WEBHOOK_SECRET"), secret_query="token"
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
        runner, port = await serve(build_app(client, asyncio.Queue()))
        print(f"serving http://127.0.0.1:{port}/webhook and /assign (Ctrl-C to stop)")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()


async def sandbox_round_trip() -> None:
    import aiohttp

    from campaignkit.sandbox import Sandbox

    async with Sandbox(speed=50) as sb, sb.client() as client:
        handled: asyncio.Queue[ReplyEvent] = asyncio.Queue()
        runner, port = await serve(build_app(client, handled))
        try:
            token = os.environ.get("WEBHOOK_SECRET", "")
            await sb.set_webhook(f"http://127.0.0.1:{port}/webhook?token={token}")
            print(f"webhook registered with the sandbox: http://127.0.0.1:{port}/webhook")

            poll_id = (await client.list_polls())[0].id
            user = User(
                cellphone="3005550101", country_code="+57", user_session_keys={"name": "Ana"}
            )
            ack = await client.send_campaign(poll_id, [user])
            async for _ in client.track(ack, until="settled", poll_interval=0.1, timeout=60):
                pass
            await sb.reply(user.cellphone, text="Hello!")
            event = await asyncio.wait_for(handled.get(), 15)
            history = await client.get_session_history(event.session_external_id)
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
