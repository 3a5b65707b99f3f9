"""``runs`` (a delivery ledger's runs, one run's counts, its users to retry),
and how every command opens the ledger ``--journal`` names."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

from .._funnel import Funnel
from .._guards import guard_words
from .._redaction import redact
from .._report import deferral_reason
from ..bulk import DEFAULT_FOLLOW_CONCURRENCY
from ..ledger import (
    DEFERRED,
    STALL_AFTER,
    STATES,
    Ledger,
    RunInfo,
    RunPause,
    Stall,
    ledger_from,
)
from .argtypes import positive_float, positive_int
from .context import AddCommand, Ctx, ExitStatus, UsageError
from .following import add_follow_timeout, check_follow_timeout, follow_first, note_unconfirmed
from .output import funnel_table, table
from .run_export import ALL, FORMATS, export_format, export_run, failure_status_list


def register(add: AddCommand) -> None:
    p = add(
        "runs",
        "the runs of a delivery ledger, or one run's counts",
        "List the runs of the ledger, or show RUN's recipients per state (expired claims, "
        "of senders that died, are first reported ambiguous) and its funnel (planned, "
        "accepted, delivered, read, replied; failures by status). --follow first tracks RUN's "
        "accepted launches until they settle, writing each person's outcome (run it again "
        "later: it resumes, and learns which SUCCESS became DELIVERED). --export writes RUN's "
        "rejected, ambiguous or suppressed users as a file that `send` reads, for a "
        "deliberate retry, or all of them, each with its state and outcome (the run.* "
        "columns: phone, state, launch, last status, delivered, read, replied and opted-out "
        "times, error); --export-status the users whose deployments ended in these failure "
        "statuses, for a follow-up run (send it under a new --run). Exports are CSV (safe in "
        "a spreadsheet: a cell that would start a formula starts with ', which `send` "
        "takes off) or JSON Lines.",
    )
    p.add_argument("run", nargs="?", help="a run's name")
    p.add_argument(
        "--journal",
        required=True,
        help="the ledger: an SQLite file or a postgresql:// DSN; it must exist (exit 7)",
    )
    exported = ["rejected", "ambiguous", "suppressed", "deferred", ALL]
    p.add_argument(
        "--export",
        choices=exported,
        help="write these users (all: every recipient, with its state and outcome)",
    )
    p.add_argument(
        "--export-status",
        metavar="STATUS",
        type=failure_status_list,
        action="extend",
        help="write the users whose deployment ended in these failure statuses as CSV "
        "(comma-separated, or repeated; e.g. FAILURE_BY_UNABLE_TO_CONTACT; needs the run's "
        "outcomes: --follow)",
    )
    p.add_argument(
        "-o", "--output", type=Path, help="file for --export/--export-status (default: stdout)"
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        help="of --export/--export-status (default: jsonl for an -o file named .jsonl, else csv)",
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="first track RUN's accepted launches until they settle, writing outcomes",
    )
    p.add_argument(
        "--follow-concurrency",
        type=positive_int,
        default=DEFAULT_FOLLOW_CONCURRENCY,
        help=f"launches tracked at once with --follow ({DEFAULT_FOLLOW_CONCURRENCY})",
    )
    p.add_argument(
        "--stall-after",
        type=positive_float,
        default=STALL_AFTER,
        metavar="SECONDS",
        help="a run whose planned users no worker has claimed for this long is shown "
        f"stalled, with the command that hands them over again ({STALL_AFTER:.0f})",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="resume RUN, paused by a guard (canary, breaker, template status) or by hand: "
        "its senders take its chunks again",
    )
    add_follow_timeout(p)
    p.set_defaults(func=cmd_runs, needs_client=False)


def open_ledger(journal: str, *, claim_ttl: float | None = None, existing: bool = False) -> Ledger:
    """The ledger ``--journal`` names (an SQLite file or a ``postgresql://`` DSN);
    ``existing``: opening it refuses a ledger that does not exist
    (:class:`~campaignkit.ledger.LedgerNotFound`, exit 7), creating nothing:
    a command that reads or resumes a run must never start an empty ledger."""
    ledger = ledger_from(journal, create=not existing)
    if claim_ttl is not None:
        ledger.claim_ttl = claim_ttl
    return ledger


def say_if_new(ctx: Ctx, ledger: Ledger) -> None:
    """The first line of a command that has just created its ledger, even with
    --quiet: a resumed run whose --journal was mistyped shows here."""
    if ledger.is_new:
        ctx.err.write(
            redact(
                f"campaignkit: new ledger created: {ledger!r} did not exist (ledger "
                f"{ledger.identity}); resuming a run? then this is not its --journal\n"
            )
        )
        ctx.err.flush()


def _created(info: RunInfo) -> str:
    return _moment(info.created)


def _moment(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def _run_json(
    info: RunInfo, counts: dict[str, int], stall: Stall | None, journal: str, funnel: Funnel
) -> dict[str, Any]:
    return {
        "run": info.run,
        "poll_id": info.poll,
        "created": _created(info),
        "input_done": info.input_done,
        "total": info.total,
        "stopped": info.stopped,
        "stalled": stall is not None,
        "stalled_since": None if stall is None else _moment(stall.since),
        "hand_over": None if stall is None else Stall.command(info, journal),
        "paused": None if info.paused is None else attrs.asdict(info.paused),
        "resume": None if info.paused is None else RunPause.command(info.run, journal),
        "counts": counts,
        "funnel": funnel.to_json(),
    }


def _stalled(info: RunInfo, stall: Stall, journal: str) -> str:
    """What a stalled run says: since when, and the command that recovers it."""
    return (
        f"run {info.run} stalled: {stall.planned} planned users unclaimed since "
        f"{_moment(stall.since)} (a broker that lost its messages, or no worker running); "
        f"hand them over again (nobody is sent twice) with the input and broker of its "
        f"first submit:\n  {Stall.command(info, journal)}"
    )


def paused_words(info: RunInfo, journal: str) -> str:
    """What a paused run says: who paused it, when, its figures, and the
    command that resumes it."""
    assert info.paused is not None
    pause = info.paused
    return (
        f"run {info.run} paused by the {pause.reason} at {_moment(pause.paused_at)}: "
        f"{pause.detail}\n  nothing more of it is sent until it is resumed:\n"
        f"  {RunPause.command(info.run, journal)}"
    )


async def resume(ctx: Ctx, ledger: Ledger, info: RunInfo) -> None:
    """Resume the run, and say how its planned recipients go out."""
    planned = await ledger.resume_run(info.run)
    was = "resumed" if info.paused is not None else "was not paused"
    ctx.print(f"run {info.run} {was}: {planned} users planned")
    if planned:
        ctx.print(
            "the chunks its senders found paused were left planned: hand them over (nobody "
            "is sent twice) by sending the same input again under the same --run and "
            "--journal (`campaignkit send --bulk`), or for workers with the input and broker "
            f"of its first submit:\n  {Stall.command(info, ctx.args.journal)}"
        )


async def cmd_runs(ctx: Ctx) -> ExitStatus:
    a = ctx.args
    if a.resume and not a.run:
        raise UsageError("--resume needs a RUN")
    for option, given in (("--export", a.export), ("--export-status", a.export_status)):
        if given and not a.run:
            raise UsageError(f"{option} needs a RUN")
    if a.follow and not a.run:
        raise UsageError("--follow needs a RUN")
    check_follow_timeout(a)
    if a.export and a.export_status:
        raise UsageError("give --export or --export-status, not both")
    for option, given in (("-o/--output", a.output), ("--format", a.format)):
        if given and not (a.export or a.export_status):
            raise UsageError(f"{option} needs --export or --export-status")
    fmt = export_format(a.format, a.output)
    async with open_ledger(a.journal, existing=True) as ledger:
        if not a.run:
            await list_runs(ctx, ledger)
            return ExitStatus.OK
        info = await ledger.run_info(a.run)
        if info is None:
            raise UsageError(f"no run named {a.run!r} in {ledger!r}")
        await ledger.expire(a.run)
        if a.resume:
            await resume(ctx, ledger, info)
            return ExitStatus.OK
        if a.follow:
            await follow_first(ctx, ledger)
        if a.export == ALL:
            outcomes = {outcome.phone: outcome for outcome in await ledger.outcomes(a.run)}
            await export_run(
                ctx, lambda: ledger.records(a.run), a.run, ALL, a.output, fmt, outcomes
            )
            return ExitStatus.OK
        if a.export:
            await export_run(
                ctx, lambda: ledger.records(a.run, [a.export]), a.run, a.export, a.output, fmt
            )
            return ExitStatus.OK
        if a.export_status:
            await export_run(
                ctx,
                lambda: ledger.follow_up_records(a.run, a.export_status),
                a.run,
                "|".join(a.export_status),
                a.output,
                fmt,
            )
            return ExitStatus.OK
        counts = await ledger.counts(a.run)
        funnel = await ledger.funnel(a.run)
        stall = await ledger.stall(a.run, stall_after=a.stall_after)
        reasons = await deferred_reasons(ledger, a.run) if counts.get(DEFERRED) else {}
        guards = guard_words(await ledger.run_options(a.run))
        if ctx.json:
            shown = _run_json(info, counts, stall, a.journal, funnel)
            ctx.emit({**shown, "deferred_reasons": reasons, "guards": guards})
        else:
            state = "input read" if info.input_done else "input still being read"
            ctx.print(
                f"run {info.run}: poll {info.poll}, created {_created(info)}, {state}"
                + (f" ({info.total} inputs)" if info.total is not None else "")
            )
            if info.stopped is not None:
                ctx.print(f"ended by a fatal answer: {info.stopped}")
            if info.paused is not None:
                ctx.print(paused_words(info, a.journal))
            if stall is not None:
                ctx.print(_stalled(info, stall, a.journal))
            if guards:
                ctx.print(f"guards: {', '.join(guards)}")
            ctx.print(table(list(counts.items()), ["state", "users"]))
            for reason, count in reasons.items():
                ctx.print(f"deferred ({reason}): {count}")
            ctx.print("")
            ctx.print(funnel_table(funnel))
            if a.follow:
                note_unconfirmed(ctx, funnel, a.run)
    return ExitStatus.OK


async def deferred_reasons(ledger: Ledger, run: str) -> dict[str, int]:
    """The run's deferred recipients per reason."""
    reasons: Counter[str] = Counter()
    async for record in ledger.records(run, [DEFERRED]):
        reasons[deferral_reason(record.detail)] += 1
    return dict(reasons)


async def list_runs(ctx: Ctx, ledger: Ledger) -> None:
    a = ctx.args
    runs = [(info, await ledger.counts(info.run)) for info in await ledger.runs()]
    stalls = {i.run: await ledger.stall(i.run, stall_after=a.stall_after) for i, _ in runs}
    if ctx.json:
        ctx.emit(
            [
                _run_json(i, counts, stalls[i.run], a.journal, await ledger.funnel(i.run))
                for i, counts in runs
            ]
        )
        return
    rows = [
        (
            info.run,
            info.poll,
            _created(info),
            "done" if info.input_done else "reading",
            *counts.values(),
        )
        for info, counts in runs
    ]
    ctx.print(table(rows, ["run", "poll", "created", "input", *(runs[0][1] if runs else STATES)]))
    for info, _ in runs:
        if info.paused is not None:
            ctx.print(paused_words(info, a.journal))
        if (stall := stalls[info.run]) is not None:
            ctx.print(_stalled(info, stall, a.journal))
