"""``sandbox``: the local emulator of the service, served until Ctrl-C."""

from __future__ import annotations

import asyncio

from .argtypes import positive_float
from .context import AddCommand, Ctx, ExitStatus


def register(add: AddCommand) -> None:
    p = add("sandbox", "run the local sandbox server until Ctrl-C")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765, help="0 picks a free port (8765)")
    p.add_argument("--speed", type=positive_float, default=1.0, help="sandbox seconds per second")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reply-probability", type=float, default=0.0, help="spontaneous replies")
    p.add_argument("--legacy", action="store_true", help="serve the retired legacy deploy")
    p.set_defaults(func=cmd_sandbox, needs_client=False)


async def cmd_sandbox(ctx: Ctx) -> ExitStatus:
    from ..sandbox import Sandbox

    a = ctx.args
    async with Sandbox(
        host=a.host,
        port=a.port,
        speed=a.speed,
        seed=a.seed,
        reply_probability=a.reply_probability,
        legacy_enabled=a.legacy,
    ) as sb:
        ctx.print(f"sandbox listening on {sb.root_url} (speed {a.speed}, seed {a.seed})")
        ctx.print("use it from another shell with:")
        ctx.print(f"  export CAMPAIGNKIT_API_KEY={sb.api_key}")
        ctx.print(f"  export CAMPAIGNKIT_BASE_URL={sb.base_url}")
        ctx.print(f"  export CAMPAIGNKIT_CAMPAIGN_URL={sb.campaign_url}")
        ctx.print(f"  export CAMPAIGNKIT_AGENT_URL={sb.agent_url}")
        ctx.print(f"admin routes: {sb.admin_url}/  (Ctrl-C to stop)")
        await asyncio.Event().wait()
    return ExitStatus.OK  # pragma: no cover - ended by Ctrl-C
