"""``demo``: the whole story against an in-process sandbox: send, track,
a reply answered by a real webhook server, its variables merged, the history."""

from __future__ import annotations

import asyncio
import os
import secrets
import shlex
import sys
import time
from typing import TYPE_CHECKING

from aiohttp import web

from .._words import counted
from ..client import CampaignClient
from ..errors import CampaignKitError
from ..models import User
from ..status import DeploymentStatus
from ..webhooks import (
    DEFAULT_SECRET_HEADER,
    AgentPicker,
    EventKind,
    WebhookEvent,
    webhook_app,
)
from .argtypes import positive_float, positive_int
from .context import AddCommand, Ctx, ExitStatus
from .output import format_history, program, status_table
from .track import track_campaign

if TYPE_CHECKING:
    from ..sandbox import Sandbox

STUCK = 3  # magic endings 9900-9902 stay in progress for good: left out of the demo
STATUSES = list(DeploymentStatus)


def register(add: AddCommand) -> None:
    p = add(
        "demo",
        "the whole story on an in-process sandbox, in under a minute",
        "Start a sandbox, send a campaign of 200 users mixing outcomes, track it live, "
        "print the per-status table, receive a user's first reply on a real local webhook "
        "server, update the session and print its history. No account, no network.",
    )
    p.add_argument(
        "--speed", type=positive_float, default=1.0, help="sandbox clock speed (1: ~10 s)"
    )
    p.add_argument("--users", type=positive_int, default=200, help="campaign size (200)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="watch the campaign on the live dashboard, kept open at the end until Ctrl-C",
    )
    p.add_argument("--dashboard-port", type=int, default=8766, help="0: a free one (8766)")
    p.set_defaults(func=cmd_demo, needs_client=False)


def demo_users(count: int) -> list[User]:
    """``count`` users: every fourth one a magic number (``99NN``, NN 03-29, in
    turn), the others ordinary numbers that end ``DELIVERED``."""
    users = []
    for i in range(count):
        if i % 4 == 3:
            nn = STUCK + (i // 4) % (len(STATUSES) - STUCK)
            cellphone = f"31{i:04d}99{nn:02d}"
        else:
            cellphone = f"300{i:07d}"
        users.append(
            User(
                cellphone=cellphone,
                country_code="+57",
                user_session_keys={"name": f"Customer {i + 1}", "segment": "demo"},
            )
        )
    return users


def next_steps() -> str:
    """The commands to try next, as this shell can run them (``campaignkit``
    may not be on PATH: ``make demo`` does not activate the virtualenv)."""
    me = program()
    text = f"Next: `{me} sandbox` to keep a sandbox running, `{me} --help` for the real service."
    # The interpreter's directory, not the program's printed form (quoted
    # where its path holds a space): the virtualenv's bin holds both.
    activate = os.path.join(os.path.dirname(sys.executable), "activate")
    if me != "campaignkit" and os.path.isfile(activate):
        sourced = f". {shlex.quote(activate)}"
        text += f"\n(`campaignkit` alone works once `{sourced}` has put it on PATH.)"
    return text


async def cmd_demo(ctx: Ctx) -> ExitStatus:
    from ..sandbox import Sandbox

    a = ctx.args
    began = time.monotonic()
    say = ctx.print
    say(f"campaignkit demo: everything runs on this machine, on the sandbox (clock x{a.speed:g})")
    async with Sandbox(speed=a.speed, seed=a.seed) as sb, sb.client() as client:
        say(f"\n1. Sandbox listening on {sb.root_url} (hosts /main, /campaign, /agent)")
        if a.dashboard:
            from ..dashboard import Dashboard, running_dashboard, sandbox_launches

            discover = sandbox_launches(sb.admin_url, sb.api_key)
            async with running_dashboard(
                Dashboard(client, discover=discover), port=a.dashboard_port
            ) as dashboard:
                say(f"   dashboard: {dashboard.url}  (open it now: the campaign starts in 3 s)")
                await asyncio.sleep(3)
                await _story(ctx, sb, client)
                say(f"\nThe dashboard stays open at {dashboard.url}: Ctrl-C to stop.")
                await asyncio.Event().wait()
        else:
            await _story(ctx, sb, client)
    say(f"\nDone in {time.monotonic() - began:.1f}s. {next_steps()}")
    return ExitStatus.OK


async def _story(ctx: Ctx, sb: Sandbox, client: CampaignClient) -> None:
    """Steps 2 to 8: send, track, reply, update, history."""
    a, say = ctx.args, ctx.print

    polls = await client.list_polls()
    poll = polls[0]
    users = demo_users(a.users)
    magic = sum(1 for u in users if u.cellphone[-4:-2] == "99")
    say(
        f"\n2. Sending poll {poll.name!r} (id {poll.id}) to {counted(len(users), 'user')}: "
        f"{len(users) - magic} ordinary numbers (they end DELIVERED) and {magic} magic "
        f"numbers ending 99NN (they end in status NN of the spec's table)"
    )
    ack = await client.send_campaign(poll.id, users)
    say(f"   queued by the service (HTTP 202 Accepted): launch_request_id {ack.launch_request_id}")

    say("\n3. Tracking until every deployment has settled (live progress on stderr)")
    status = await track_campaign(
        ctx,
        client,
        ack.launch_request_id,
        until="settled",
        poll_interval=0.2,
        max_interval=1.0,
        timeout=60,
        label="   deployments",
    )
    say(f"\n4. Campaign {status.status.value}; final per-status table:")
    say("   " + status_table(status).replace("\n", "\n   "))

    replied: asyncio.Future[WebhookEvent] = asyncio.get_running_loop().create_future()
    picker = AgentPicker(client, ttl=60)

    async def on_event(event: WebhookEvent) -> dict[str, str]:
        """What a real integration does: answer with variables the flow uses."""
        agent = await picker.pick()
        if not replied.done():
            replied.set_result(event)
        return {"plan": "gold", "assigned_agent": str(agent.id)}

    token = secrets.token_urlsafe(16)
    app = webhook_app(on_event, kinds={EventKind.RESPONSE}, secret=token)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        hook = f"http://127.0.0.1:{port}/webhook"
        await sb.set_webhook(hook, kinds=["response"], headers={DEFAULT_SECRET_HEADER: token})
        say(
            f"\n5. Webhook server (webhook_app) listening on {hook}, registered with "
            f"the sandbox (a shared secret travels in its {DEFAULT_SECRET_HEADER} header)"
        )

        delivered = [d for d in status.deployments if d.status is DeploymentStatus.DELIVERED]
        if not delivered:
            raise CampaignKitError("no deployment was delivered: nobody can reply")
        who = delivered[0].cellphone
        say(f'\n6. User +57 {who} replies "Yes, tell me more" (simulated by the sandbox)')
        result = await sb.reply(who, text="Yes, tell me more", country_code="+57")
        call = result.get("webhook") or {}
        say(f"   the sandbox POSTed the response webhook: HTTP {call.get('status')}")
        event = await asyncio.wait_for(replied, 15)
        say(f"   on_event got session_id {event.session_id}, the answer {event.answer!r}")

        say("\n7. on_event answered plan=gold, assigned_agent=<AgentPicker> within 10 s;")
        say(f"   the sandbox merged them into the session: {call.get('keys')}")

        history = await client.get_session_history(result["session_external_id"])
        say(f"\n8. Session history ({len(history)} messages):")
        say("   " + format_history(history).replace("\n", "\n   "))
    finally:
        await runner.cleanup()
