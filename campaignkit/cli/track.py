"""``track`` and ``status``: a campaign followed live, or read once."""

from __future__ import annotations

from .. import errors
from .._words import counted
from ..client import CampaignClient
from ..models import CampaignStatus
from ..status import DONE_MEANS, CampaignState
from .argtypes import non_negative_float, positive_float
from .context import AddCommand, Ctx, ExitStatus, UsageError
from .output import (
    ProgressDisplay,
    no_such_path,
    settled,
    stages_line,
    state_line,
    status_json,
    status_table,
    table,
)

NOT_FOUND_GRACE = 10.0
"""Seconds ``track`` waits for an id the service does not know: long enough
for a launch just sent, short enough that a mistyped id is told soon."""


def register(add: AddCommand) -> None:
    p = add(
        "track",
        "follow a campaign live until DONE (or settled)",
        "Follow LAUNCH_REQUEST_ID live: people per stage (waiting, sent, delivered, failed), "
        f"then the per-status table. {DONE_MEANS[0].upper()}{DONE_MEANS[1:]}.",
    )
    p.add_argument("launch_request_id")
    p.add_argument(
        "--settled", action="store_true", help="go on until no deployment is in progress"
    )
    p.add_argument("--poll-interval", type=positive_float, default=1.0, help="seconds (1)")
    p.add_argument(
        "--max-interval",
        type=positive_float,
        default=5.0,
        help="longest wait between polls while nothing changes (5)",
    )
    p.add_argument(
        "--track-timeout",
        dest="track_timeout",
        type=positive_float,
        help="give up after this many seconds (exit 5)",
    )
    p.add_argument(
        "--not-found-grace",
        type=non_negative_float,
        default=NOT_FOUND_GRACE,
        help="seconds an id the service does not know (yet) is waited for: a new launch "
        f"can take a moment to appear ({NOT_FOUND_GRACE:g})",
    )
    p.set_defaults(func=cmd_track, needs_client=True)

    p = add("status", "a campaign's state and per-status counts")
    p.add_argument("launch_request_id")
    p.add_argument("--deployments", action="store_true", help="list every deployment")
    p.set_defaults(func=cmd_status, needs_client=True)


async def track_campaign(
    ctx: Ctx,
    client: CampaignClient,
    launch_request_id: str,
    *,
    until: str,
    poll_interval: float = 1.0,
    max_interval: float = 5.0,
    timeout: float | None = None,
    not_found_grace: float = 30.0,
    label: str = "tracking",
) -> CampaignStatus:
    """Follow a campaign with a live progress display; the last status read."""
    tracker = client.track(
        launch_request_id,
        until=until,
        poll_interval=poll_interval,
        max_interval=max(max_interval, poll_interval),
        timeout=timeout,
        not_found_grace=not_found_grace,
    )
    said: list[CampaignState] = []
    with ProgressDisplay(ctx.err, label, enabled=not ctx.args.quiet) as progress:

        def show() -> None:
            update = tracker.snapshot()
            if update.state is not None and update.state not in said[-1:]:
                said.append(update.state)
                progress.say(state_line(update.state))
            progress.update(update.done, update.total or None, stages_line(update))

        async with tracker:
            try:
                async for _change in tracker:
                    show()
            finally:
                show()
    result = tracker.result
    if result is None:  # pragma: no cover - the tracker ends after a poll
        result = await client.get_campaign_status(launch_request_id)
    return result


def report_status(ctx: Ctx, status: CampaignStatus) -> None:
    if ctx.json:
        ctx.emit(status_json(status))
    else:
        ctx.print(
            f"request {status.status.value} ({status.status.description}): "
            f"{counted(len(status.deployments), 'deployment')}, {settled(status)} settled"
        )
        ctx.print(status_table(status))


async def cmd_track(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    a = ctx.args
    launch = a.launch_request_id
    ctx.note(
        f"following launch request {launch} until "
        f"{'every deployment has settled' if a.settled else 'the service has taken it all'}; "
        f"an id the service does not know is given up after {a.not_found_grace:g} s"
    )
    try:
        status = await track_campaign(
            ctx,
            client,
            launch,
            until="settled" if a.settled else "done",
            poll_interval=a.poll_interval,
            max_interval=a.max_interval,
            timeout=a.track_timeout,
            not_found_grace=a.not_found_grace,
        )
    except errors.TimeoutError as exc:
        if exc.last_status is not None and not ctx.json:
            ctx.print(status_table(exc.last_status))
        raise
    except errors.NotFoundError as exc:
        if no_such_path(exc):
            raise
        raise UsageError(
            f"the service knows no launch request {launch!r} (still 404 after "
            f"{a.not_found_grace:g} s): check the id, `send` prints it as launch_request_id"
        ) from None
    report_status(ctx, status)
    return ExitStatus.OK


async def cmd_status(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    status = await client.get_campaign_status(ctx.args.launch_request_id)
    if ctx.json:
        ctx.emit(status_json(status))
        return ExitStatus.OK
    ctx.print(
        f"launch request {status.launch_request_id}: {status.status.value} "
        f"({status.status.description}), poll {status.poll_id}, "
        f"{counted(len(status.deployments), 'deployment')}, {settled(status)} settled"
    )
    if status.deployments:
        ctx.print(status_table(status))
    if ctx.args.deployments:
        ctx.print()
        rows = [(d.cellphone, d.status or "", d.conversation_id) for d in status.deployments]
        ctx.print(table(rows, ["cellphone", "status", "conversation_id"]))
    return ExitStatus.OK
