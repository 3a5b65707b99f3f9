"""``dashboard`` and ``report``: watching campaigns in a browser."""

from __future__ import annotations

import os
from pathlib import Path

from ..client import CampaignClient
from ..dashboard import Dashboard, sandbox_launches, serve_dashboard, write_report
from .context import AddCommand, Ctx, ExitStatus
from .track import report_status

DEFAULT_PORT = 8766


def register(add: AddCommand) -> None:
    p = add(
        "dashboard",
        "a live web page of launches: delivery funnel, failures, status over time",
        "Serve the dashboard until Ctrl-C. The service has no call that lists launches: "
        "the page lists the ones given with --launch, opened at /launches/ID, or found on "
        "a sandbox given with --sandbox-admin. Bound beyond 127.0.0.1 (--host) it requires "
        "a token: --token, $CAMPAIGNKIT_DASHBOARD_TOKEN, or a new one printed once in its "
        "address.",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to bind (127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"0: a free one ({DEFAULT_PORT})")
    p.add_argument(
        "--token",
        default=os.environ.get("CAMPAIGNKIT_DASHBOARD_TOKEN"),
        help="the token visitors must show (default: $CAMPAIGNKIT_DASHBOARD_TOKEN; "
        "beyond 127.0.0.1 a new random one)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the dashboard is reached by, besides localhost and IP addresses",
    )
    p.add_argument(
        "--max-followed",
        type=int,
        default=50,
        help="launches followed at once; the least recently viewed is dropped (50)",
    )
    p.add_argument("--launch", action="append", default=[], help="a launch_request_id to show")
    p.add_argument(
        "--sandbox-admin", metavar="URL", help="a sandbox's admin URL: list its launches too"
    )
    p.set_defaults(func=cmd_dashboard, needs_client=True)

    p = add("report", "write a launch's funnel and charts as one self-contained HTML file")
    p.add_argument("launch_request_id")
    p.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write")
    p.set_defaults(func=cmd_report, needs_client=True)


async def cmd_dashboard(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    a = ctx.args
    discover = None
    if a.sandbox_admin:
        discover = sandbox_launches(a.sandbox_admin.rstrip("/"), client.config.api_key)
    await serve_dashboard(
        Dashboard(client, launches=a.launch, discover=discover, max_followed=a.max_followed),
        a.host,
        a.port,
        token=a.token,
        allow_hosts=a.allow_host,
        on_ready=lambda dashboard: ctx.print(f"dashboard: {dashboard.url}  (Ctrl-C to stop)"),
    )
    return ExitStatus.OK


async def cmd_report(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    a = ctx.args
    status = await write_report(client, a.launch_request_id, a.output)
    if ctx.json:
        ctx.emit({"launch_request_id": status.launch_request_id, "output": str(a.output)})
        return ExitStatus.OK
    report_status(ctx, status)
    ctx.note(f"report written to {a.output}")
    return ExitStatus.OK
