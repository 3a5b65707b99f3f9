"""``dashboard`` and ``report``: watching campaigns in a browser."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from .._words import counted
from ..client import CampaignClient
from ..dashboard import (
    Access,
    Dashboard,
    PollNames,
    Sample,
    follow_report,
    launch_sent,
    ledger_history,
    poll_id,
    run_of,
    sandbox_launches,
    serve_dashboard,
    write_report,
    write_run_report,
)
from ..ledger import Ledger
from .argtypes import positive_float
from .context import AddCommand, Ctx, ExitStatus, UsageError
from .runs import open_ledger
from .track import report_status

DEFAULT_PORT = 8766


def register(add: AddCommand) -> None:
    p = add(
        "dashboard",
        "a live web page of campaigns: runs, launches, delivery funnel, failures, status over time",
        "Serve the dashboard until Ctrl-C. The service has no call that lists launches: "
        "the page lists the bulk runs of --journal (each with its launches), the launches "
        "given with --launch or opened at /launches/ID, and those found on a sandbox given "
        "with --sandbox-admin. Bound beyond 127.0.0.1 (--host) it requires a token: "
        "--token, $CAMPAIGNKIT_DASHBOARD_TOKEN, or a new one printed once in its address.",
    )
    p.add_argument("--host", default="127.0.0.1", help="the address to bind (127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"0: a free one ({DEFAULT_PORT})")
    p.add_argument(
        "--token",
        type=_token,
        # Empty ("${CAMPAIGNKIT_DASHBOARD_TOKEN}" of an unset variable): not given.
        default=os.environ.get("CAMPAIGNKIT_DASHBOARD_TOKEN") or None,
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
        "--journal",
        help="a ledger (SQLite file or postgresql:// DSN), which must exist: list its runs",
    )
    p.add_argument(
        "--sandbox-admin", metavar="URL", help="a sandbox's admin URL: list its launches too"
    )
    p.set_defaults(func=cmd_dashboard, needs_client=True)

    p = add(
        "report",
        "write a launch's (or a bulk run's) funnel and charts as one self-contained HTML file",
        "Follows the launch until it settles (--no-wait: reads it once; --follow-for: at "
        "most that long), then writes the "
        "report; its chart covers what was watched, from the start of the bulk run that "
        "sent it when --journal knows it, with the statuses the run's following saw. "
        "--run NAME instead: the report of the whole bulk run, read from --journal alone "
        "(its funnel, its whole life as the run's following saw it, its failures, its launches).",
    )
    p.add_argument("launch_request_id", nargs="?", help="the launch (or give --run)")
    p.add_argument("--run", metavar="NAME", help="report the whole bulk run NAME of --journal")
    p.add_argument("-o", "--output", type=Path, required=True, help="the HTML file to write")
    p.add_argument(
        "--journal",
        help="the ledger of the run that sent it, which must exist: the chart starts there "
        "(--run: its)",
    )
    p.add_argument(
        "--no-wait", action="store_true", help="read the launch once instead of following it"
    )
    p.add_argument(
        "--follow-for",
        metavar="SECONDS",
        type=positive_float,
        help="stop following after this many seconds and write what was seen",
    )
    p.set_defaults(func=cmd_report, needs_client=True)


def _token(text: str) -> str:
    try:
        Access(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


@contextlib.asynccontextmanager
async def maybe_ledger(journal: str | None) -> AsyncIterator[Ledger | None]:
    """The ledger ``--journal`` names, open while in the block (None without
    one; exit 7, nothing created, if it does not exist)."""
    if journal is None:
        yield None
        return
    async with open_ledger(journal, existing=True) as ledger:
        yield ledger


async def cmd_dashboard(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    a = ctx.args
    discover = None
    if a.sandbox_admin:
        discover = sandbox_launches(a.sandbox_admin.rstrip("/"), client.config.api_key)
    async with maybe_ledger(a.journal) as ledger:
        await serve_dashboard(
            Dashboard(
                client,
                launches=a.launch,
                discover=discover,
                max_followed=a.max_followed,
                ledger=ledger,
            ),
            a.host,
            a.port,
            token=a.token,
            allow_hosts=a.allow_host,
            on_ready=lambda dashboard: ctx.print(f"dashboard: {dashboard.url}  (Ctrl-C to stop)"),
        )
    return ExitStatus.OK


async def cmd_report(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    a = ctx.args
    if (a.launch_request_id is None) == (a.run is None):
        raise UsageError("report: give a launch_request_id or --run NAME (exactly one)")
    if a.run is not None:
        return await _run_report(ctx, client)
    launch = a.launch_request_id
    seen: list[Sample] = []  # what the ledger saw of the launch, if it followed the run
    async with maybe_ledger(a.journal) as ledger:
        info = None if ledger is None else await run_of(ledger, launch)
        run_funnel = None if ledger is None or info is None else await ledger.funnel(info.run)
        if ledger is not None and info is not None:
            seen = await ledger_history(ledger, info.run, launch)
        sent = None if ledger is None or info is None else await launch_sent(ledger, launch)
    history: list[Sample] = []
    if a.no_wait:
        status = await client.get_campaign_status(launch)
    else:
        ctx.note(f"following {launch} until it settles (at most --follow-for seconds)")
        status, history = await follow_report(client, launch, timeout=a.follow_for)
    names = {poll.id: poll.name for poll in await client.list_polls()}
    await write_report(
        client,
        launch,
        a.output,
        history=[s for s in seen if not history or s.at < history[0].at] + history,
        status=status,
        poll_name=names.get(status.poll_id),
        sent=sent,
        run_funnel=run_funnel,
    )
    if ctx.json:
        ctx.emit({"launch_request_id": status.launch_request_id, "output": str(a.output)})
        return ExitStatus.OK
    report_status(ctx, status)
    ctx.note(f"report written to {a.output}")
    return ExitStatus.OK


async def _run_report(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    """``report --run NAME``: the run's report, from its ledger (and its poll's name)."""
    a = ctx.args
    if a.journal is None:
        raise UsageError("report --run needs --journal (the ledger of the run)")
    if a.no_wait or a.follow_for is not None:
        raise UsageError("--no-wait and --follow-for follow a launch: not with --run")
    async with open_ledger(a.journal, existing=True) as ledger:
        info = await ledger.run_info(a.run)
        if info is None:
            raise UsageError(f"--run {a.run}: {a.journal} has no such run")
        names = PollNames(client)
        await names.learn([poll_id(info.poll)])
        run = await write_run_report(
            ledger, a.run, a.output, poll_name=names.get(poll_id(info.poll))
        )
    if ctx.json:
        ctx.emit({"run": run.run, "launches": len(run.launches), "output": str(a.output)})
        return ExitStatus.OK
    launches, recipients = (
        counted(len(run.launches), "launch"),
        counted(run.recipients, "recipient"),
    )
    ctx.print(f"run {run.run}: {launches}, {recipients}")
    ctx.note(f"report written to {a.output}")
    return ExitStatus.OK
