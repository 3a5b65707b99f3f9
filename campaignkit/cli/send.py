"""``send``: one campaign request, or a bulk send in chunks (``--bulk``)."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from .. import errors
from .._report import COOLDOWN, DAILY_LIMIT, OPEN_CONVERSATION, PAUSED, ZONE_UNKNOWN
from .._words import counted
from ..bulk import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_INTERRUPT_GRACE,
    BulkChunk,
    BulkReport,
    InvalidUser,
)
from ..client import CampaignClient
from ..ledger import ACCEPTED, Ledger, MemoryLedger, ledger_from
from ..progress import ProgressUpdate, percent
from . import sending_line
from .argtypes import non_negative_float, positive_int
from .context import AddCommand, Ctx, ExitStatus, UsageError
from .following import add_follow_timeout, check_follow_timeout, note_unconfirmed
from .input import add_users_arguments, bulk_input, load_users
from .interrupt import bulk_run, print_interrupted, settled, terminated_cancels
from .output import (
    ProgressDisplay,
    ambiguous_advice,
    command_line,
    counts_json,
    funnel_table,
    one_line,
    plain,
    table,
)
from .runs import say_if_new
from .track import report_status, track_campaign


def register(add: AddCommand) -> None:
    p = add(
        "send",
        "send a campaign to users from a CSV or JSON file",
        "Send POLL_ID to the users of FILE ('-' for stdin). CSV: a header row with "
        "cellphone, country_code, optional deployment_eta (UNIX seconds or ISO 8601 with a "
        "UTC offset); every other column is a session variable. JSON: an array of user "
        "objects as on the wire ({cellphone, country_code, user_session_keys, "
        'deployment_eta?}; user_session_keys may be an object), or {"users": [...]}.',
    )
    add_users_arguments(p)
    p.add_argument("--track", action="store_true", help="track the campaign after sending")
    bulk = p.add_argument_group("bulk (large lists: chunks, concurrency, resumable journal)")
    bulk.add_argument("--bulk", action="store_true", help="send in chunks")
    bulk.add_argument("--chunk-size", type=positive_int, default=DEFAULT_CHUNK_SIZE)
    bulk.add_argument("--concurrency", type=positive_int, default=4)
    bulk.add_argument(
        "--journal",
        help="delivery ledger: an SQLite file or a postgresql:// DSN; rerun to resume (the "
        "first line says when it creates a new ledger)",
    )
    bulk.add_argument("--run", help="the run's name in the ledger (default: poll-POLL_ID)")
    bulk.add_argument(
        "--retry-rejected", action="store_true", help="send again the run's rejected users"
    )
    bulk.add_argument(
        "--interrupt-grace",
        type=non_negative_float,
        default=DEFAULT_INTERRUPT_GRACE,
        metavar="SECONDS",
        help="on Ctrl-C or SIGTERM, how long the requests under way may take to be answered "
        f"(default {DEFAULT_INTERRUPT_GRACE:g}); a second Ctrl-C stops at once",
    )
    bulk.add_argument(
        "--ignore-suppression",
        action="store_true",
        help="send to numbers on the ledger's suppression list too (this run only)",
    )
    bulk.add_argument(
        "--follow",
        action="store_true",
        help="then track the accepted launches until they settle, writing each person's "
        "outcome into the journal, and show the run's funnel",
    )
    add_follow_timeout(bulk)
    bulk.add_argument(
        "--dry-run",
        action="store_true",
        help="report what the send would do now (sent, suppressed, deferred and why, invalid, "
        "duplicates), every rule applied; send nothing and change no ledger",
    )
    bulk.add_argument(
        "--max-recipients",
        type=positive_int,
        metavar="N",
        help="refuse an input of more than N users before anything is sent",
    )
    bulk.add_argument(
        "--confirm-over",
        type=positive_int,
        metavar="N",
        help="on a terminal, show the dry run and ask before sending to more than N users",
    )
    sending_line.add_options(p)
    p.set_defaults(func=cmd_send, needs_client=True)


async def cmd_send(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    a = ctx.args
    if a.bulk:
        return await cmd_bulk(ctx, client)
    for flag, given in (
        ("--journal", a.journal),
        ("--run", a.run),
        ("--retry-rejected", a.retry_rejected),
        ("--ignore-suppression", a.ignore_suppression),
        ("--follow", a.follow),
        ("--follow-timeout", a.follow_timeout is not None),
        ("--dry-run", a.dry_run),
        ("--max-recipients", a.max_recipients),
        ("--confirm-over", a.confirm_over),
        *((flag, True) for flag in sending_line.given(a)),
    ):
        if given:
            raise UsageError(f"{flag} needs --bulk")
    users = load_users(a.file, a.format)
    if not users:
        raise UsageError(f"{a.file}: no users")
    sent_at = datetime.now(UTC)
    try:
        ack = await client.send_campaign(a.poll_id, users)
    except errors.AmbiguousSendError:
        resend = command_line("send", str(a.poll_id), a.file)
        ctx.note(ambiguous_advice(a.poll_id, len(users), sent_at, resend))
        raise
    if ctx.json and not a.track:
        ctx.emit(ack)
        return ExitStatus.OK
    if not ctx.json:
        ctx.print(f"{ack.message.rstrip('.')}: {counted(len(users), 'user')}, poll {ack.id}")
        ctx.print(f"launch_request_id: {ack.launch_request_id}")
        ctx.print(f"batch_id:          {ack.batch_id}")
    if not a.track:
        ctx.note(f"follow it with: {command_line('track', ack.launch_request_id)}")
        return ExitStatus.OK
    status = await track_campaign(ctx, client, ack.launch_request_id, until="done")
    if ctx.json:
        ctx.emit({"ack": plain(ack), "status": plain(status), "counts": counts_json(status)})
    else:
        report_status(ctx, status)
    return ExitStatus.OK


async def cmd_bulk(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    a = ctx.args
    if (a.run or a.retry_rejected or a.ignore_suppression) and not a.journal:
        raise UsageError("--run, --retry-rejected and --ignore-suppression need --journal")
    check_follow_timeout(a)
    rules = sending_line.options(a)
    if a.confirm_over is not None and not a.dry_run:
        if not sys.stdin.isatty():
            raise UsageError("--confirm-over asks on a terminal: run --dry-run first instead")
        users, _ = bulk_input(a.file, a.format)
        dry = await client.send_bulk(
            a.poll_id, users, journal=a.journal, run=a.run, dry_run=True, **rules
        )
        would = dry.counts["accepted"]
        if would > a.confirm_over:
            print_bulk_report(ctx, dry, datetime.now(UTC), dry_run=True)
            answer = await asyncio.to_thread(input, f"send to {would} users? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                ctx.print("not sent")
                return ExitStatus.OK
    users, total = bulk_input(a.file, a.format)
    if not a.journal:
        # A ledger of our own: an interrupted send's summary is read from it.
        async with MemoryLedger() as memory:
            return await _bulk(ctx, client, users, total, rules, memory)
    # Opened here, to say first whether it is new: a resumed run whose
    # --journal was mistyped would otherwise be sent again in silence.
    async with ledger_from(a.journal) as ledger:
        say_if_new(ctx, ledger)
        return await _bulk(ctx, client, users, total, rules, ledger)


async def _bulk(
    ctx: Ctx,
    client: CampaignClient,
    users: Iterable[Any],
    total: int | None,
    rules: dict[str, Any],
    ledger: Ledger,
) -> ExitStatus:
    a = ctx.args
    sent_at = datetime.now(UTC)
    # A rerun's report is its run's: what an earlier send had done is said so.
    earlier = (await ledger.counts(bulk_run(a)))[ACCEPTED]
    last: ProgressUpdate | None = None
    with ProgressDisplay(ctx.err, "sending", enabled=not a.quiet) as progress, terminated_cancels():

        def on_progress(update: ProgressUpdate) -> None:
            nonlocal last
            last = update
            progress.update(update.done, max(total or 0, update.total) or None, settled(update))

        report: BulkReport | None
        try:
            report = await client.send_bulk(
                a.poll_id,
                users,
                chunk_size=a.chunk_size,
                concurrency=a.concurrency,
                journal=ledger,
                run=a.run,
                retry_rejected=a.retry_rejected,
                ignore_suppression=a.ignore_suppression,
                on_progress=on_progress,
                interrupt_grace=a.interrupt_grace,
                follow=a.follow,
                follow_timeout=a.follow_timeout,
                dry_run=a.dry_run,
                max_recipients=a.max_recipients,
                **rules,
            )
        except asyncio.CancelledError:
            # Ctrl-C or SIGTERM: send_bulk stopped gracefully (said below the progress).
            report = None
        except errors.ValidationError as exc:
            if any(path.startswith("users") or path == "poll_id" for path, _ in exc.problems):
                raise
            raise UsageError(one_line(exc)) from None
    if report is None:
        await print_interrupted(ctx, ledger, last, total, sent_at)
        return ExitStatus.INTERRUPTED
    if ctx.json:
        ctx.emit(bulk_summary(report))
        return bulk_status(report)
    if report.ambiguous:
        # Ambiguous in an earlier send of the run: the sessions since it began.
        info = await ledger.run_info(bulk_run(a))
        if info is not None:
            sent_at = min(sent_at, datetime.fromtimestamp(info.created, UTC))
    print_bulk_report(ctx, report, sent_at, dry_run=a.dry_run, earlier=earlier)
    if a.follow and report.funnel is not None:
        ctx.print(funnel_table(report.funnel))
        note_unconfirmed(ctx, report.funnel, bulk_run(a))
    return bulk_status(report)


def bulk_status(report: BulkReport) -> ExitStatus:
    """The exit status of a bulk send."""
    if report.ambiguous:
        return ExitStatus.AMBIGUOUS
    if report.rejected or report.invalid or report.deferred:
        return ExitStatus.PARTIAL
    return ExitStatus.OK


def print_bulk_report(
    ctx: Ctx, report: BulkReport, sent_at: datetime, *, dry_run: bool = False, earlier: int = 0
) -> None:
    """The report's table and notes; ``earlier``: the run's users accepted
    before this send (a rerun's report counts them, never sending them again)."""
    journal = ctx.args.journal
    if dry_run:
        ctx.print("dry run: nothing was sent, no ledger changed ('accepted': would be sent)")
    ctx.print(table(list(report.counts.items()), ["outcome", "users"]))
    if dry_run:
        would = report.counts["accepted"]
        ctx.print(
            f"{counted(would, 'user')} would be sent in {counted(len(report.accepted), 'request')}"
        )
    else:
        accepted = f"{counted(len(report.accepted), 'campaign')} accepted in {report.elapsed:.1f}s"
        if earlier:
            run = bulk_run(ctx.args)
            accepted += (
                f" ({counted(earlier, 'user')} by an earlier send of run {run}: not sent again)"
            )
        ctx.print(accepted)
    for item in report.invalid[:5]:
        ctx.note(f"invalid: {invalid_place(item)}")
    if len(report.invalid) > 5:
        ctx.note(f"... and {counted(len(report.invalid) - 5, 'more invalid user')}")
    if report.suppressed:
        ctx.note(
            f"suppressed, not sent: {counted(len(report.suppressed), 'user')} "
            "on the suppression list "
            f"({command_line('suppress', 'list', '--journal', journal)}; "
            "--ignore-suppression sends them)"
        )
    for label, chunks in (("rejected", report.rejected), ("ambiguous", report.ambiguous)):
        for c in chunks:
            ctx.note(
                f"{label}: chunk {c.index} ({counted(c.size, 'user')}): "
                f"{one_line(c.error) if c.error else ''}"
            )
    if report.ambiguous:
        count = sum(c.size for c in report.ambiguous)
        resend = None
        if journal:
            run = bulk_run(ctx.args)
            resend = (
                command_line("runs", run, "--journal", journal, "--export", "ambiguous")
                + " -o ambiguous.csv && "
                + command_line("send", str(report.poll_id), "ambiguous.csv")
            )
        ctx.note(ambiguous_advice(report.poll_id, count, sent_at, resend))
        ctx.note(
            "Rerunning with the same --journal reports them again and never resends them."
            if journal
            else "With --journal FILE a rerun never sends anyone twice and can list them."
        )
    elif report.rejected and journal:
        ctx.note(
            "rejected chunks were not sent: rerun with the same --journal and "
            "--retry-rejected to retry them"
        )
    if report.paused is not None and journal:
        run = bulk_run(ctx.args)
        ctx.note(
            f"the run is paused ({report.paused}): nothing more of it is sent until "
            f"{command_line('runs', run, '--journal', journal, '--resume')}"
        )
    for reason, count in report.deferred_reasons.items():
        ctx.note(
            f"deferred ({reason}), not sent: {counted(count, 'user')}: {_RERUN.get(reason, '')}"
        )
    if report.lines:
        base = sum(report.lines.values())
        ctx.print(
            table(
                [(line, n, percent(n, base)) for line, n in report.lines.items()],
                ["line", "users", "share"],
            )
        )


_RERUN: Final = {
    COOLDOWN: "messaged within the cool-down and no reply since; rerun once it has passed",
    OPEN_CONVERSATION: "their conversation is open; rerun once it has closed",
    PAUSED: "the run is paused; resume it (campaignkit runs RUN --resume) and rerun",
    DAILY_LIMIT: "over the daily limit; rerun the same command once the budget allows",
    ZONE_UNKNOWN: "no time zone to hold the send window in (none known for the number, or "
    "its zones share no hour of the window); give them a 'tz' column (or --default-tz) "
    "and rerun the same command",
}


def invalid_place(item: InvalidUser) -> str:
    """An invalid input's reason led by its place, named once: its file line
    (a CSV row's reason starts with it) or its input number (for the
    ``users[i]`` the validation names it by)."""
    if item.row:
        where = f"line {item.row}"
        return f"{where}: {item.reason.removeprefix(f'{where}: ')}"
    reason = re.sub(rf"^users\[{item.position}\](?:\.|: )", "", item.reason)
    return f"input #{item.position + 1}: {reason}"


def bulk_summary(report: BulkReport) -> dict[str, Any]:
    def chunks(items: Sequence[BulkChunk]) -> list[dict[str, Any]]:
        return [
            {"chunk": c.index, "size": c.size, "error": one_line(c.error) if c.error else None}
            for c in items
        ]

    return {
        "poll_id": report.poll_id,
        "total": report.total,
        "counts": report.counts,
        "complete": report.complete,
        "elapsed": round(report.elapsed, 3),
        "launch_request_ids": report.launch_request_ids,
        "invalid": [
            {"position": i.position, "row": i.row, "reason": i.reason} for i in report.invalid
        ],
        "rejected": chunks(report.rejected),
        "ambiguous": chunks(report.ambiguous),
        "deferred": chunks(report.deferred),
        "deferred_reasons": report.deferred_reasons,
        "suppressed": [
            {"position": s.position, "phone": s.phone, "reason": s.reason}
            for s in report.suppressed
        ],
        "funnel": None if report.funnel is None else report.funnel.to_json(),
        "lines": report.lines,
    }
