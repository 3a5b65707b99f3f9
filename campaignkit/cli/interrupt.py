"""An interrupted ``send --bulk`` (Ctrl-C, SIGTERM): what it did, and the
command that resumes it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Iterator
from datetime import datetime

from .._words import counted
from ..bulk import DEFAULT_INTERRUPT_GRACE, default_run
from ..ledger import PLANNED, Ledger
from ..progress import ProgressUpdate
from .context import Ctx
from .output import ambiguous_advice, command_line


def bulk_run(a: argparse.Namespace) -> str:
    """The run a bulk send's arguments name: ``--run``, else the poll's default."""
    run: str = a.run or default_run(a.poll_id)
    return run


@contextlib.contextmanager
def terminated_cancels() -> Iterator[None]:
    """SIGTERM cancels the running command as Ctrl-C does (``asyncio.run``
    cancels it on the first SIGINT); a second SIGTERM stops at once."""
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    received = 0

    def terminate() -> None:
        nonlocal received
        received += 1
        if received > 1 or task is None:
            raise KeyboardInterrupt
        task.cancel()

    try:
        loop.add_signal_handler(signal.SIGTERM, terminate)
    except (ValueError, RuntimeError, NotImplementedError):
        # Not the main thread (cli.run in a thread), or no signals (Windows).
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


SETTLED = ("accepted", "rejected", "ambiguous", "deferred", "suppressed", "invalid", "duplicate")
"""The states of the inputs a bulk send has settled, as its progress counts them."""


def settled(update: ProgressUpdate) -> str:
    """``accepted 40, ambiguous 2``: the settled inputs of a bulk send's update."""
    counts = update.states
    return ", ".join(f"{state} {counts[state]}" for state in SETTLED if counts.get(state))


async def run_counts(ledger: Ledger, run: str) -> dict[str, int]:
    """What ``run`` holds, per settled state, as its report read from
    ``ledger`` says (in flight: ambiguous), once its send has stopped; those
    left planned, for the resume to send, are not counted (not rejected)."""
    report = await ledger.report(run)
    counts = {state: report.counts.get(state, 0) for state in SETTLED}
    counts["rejected"] -= (await ledger.counts(run)).get(PLANNED, 0)
    return counts


async def print_interrupted(
    ctx: Ctx, ledger: Ledger, last: ProgressUpdate | None, total: int | None, sent_at: datetime
) -> None:
    """What an interrupted bulk send did, read from its ``ledger`` (the
    progress seen before the interrupt can miss what settled after it), and
    the command that resumes it."""
    a = ctx.args
    counts = await run_counts(ledger, bulk_run(a))
    inputs = max(total or 0, 0 if last is None else last.total)
    resume = resume_command(a) if a.journal else None
    if ctx.json:
        ctx.emit({"interrupted": True, "counts": counts, "inputs": total, "resume": resume})
    said = ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "nothing settled"
    unsent = inputs - sum(counts.values())
    rest = f"; {unsent} of {counted(inputs, 'input')} not sent" if total is not None else ""
    ctx.note(f"interrupted: {said}{rest}")
    if counts["ambiguous"]:
        ctx.note(ambiguous_advice(a.poll_id, counts["ambiguous"], sent_at, None))
    if resume is None:
        ctx.note(
            "without --journal this run cannot be resumed: sending the file again would "
            f"send again to the {counts['accepted']} accepted. "
            "Use --journal FILE to make it resumable."
        )
        return
    ctx.note("resume it (nobody accepted or ambiguous is sent again) with:\n  " + resume)
    if a.api_key:
        ctx.note("(give the API key again: --api-key, or better CAMPAIGNKIT_API_KEY)")


def resume_command(a: argparse.Namespace) -> str:
    """The command line that resumes an interrupted ``send --bulk``: the
    same poll, file, ledger, run and options (never the API key), shell-quoted."""
    argv = ["send", str(a.poll_id), a.file, "--bulk"]
    argv += ["--journal", a.journal, "--run", bulk_run(a)]
    argv += ["--chunk-size", str(a.chunk_size), "--concurrency", str(a.concurrency)]
    if a.format:
        argv += ["--format", a.format]
    argv += [
        flag
        for flag in ("--retry-rejected", "--ignore-suppression", "--follow")
        if getattr(a, flag[2:].replace("-", "_"))
    ]
    if a.follow_timeout is not None:
        argv += ["--follow-timeout", str(a.follow_timeout)]
    for flag, value in (
        ("--send-window", a.send_window),
        ("--days", a.days),
        ("--default-tz", a.default_tz),
    ):
        argv += [flag, value] if value else []
    if a.daily_limit is not None:
        argv += ["--daily-limit", str(a.daily_limit)]
    for line in a.lines or ():
        argv += ["--line", line]
    if a.interrupt_grace != DEFAULT_INTERRUPT_GRACE:
        argv += ["--interrupt-grace", f"{a.interrupt_grace:g}"]
    argv += connection_flags(a)
    argv += [flag for flag in ("--json", "--quiet", "--debug") if getattr(a, flag[2:])]
    return command_line(*argv)


def connection_flags(a: argparse.Namespace) -> list[str]:
    """The options given that reach the same service (never the API key)."""
    argv = []
    for name in ("base_url", "campaign_url", "agent_url", "timeout", "max_retries"):
        if (value := getattr(a, name)) is not None:
            argv += ["--" + name.replace("_", "-"), str(value)]
    return argv if a.resend_after_429 else [*argv, "--no-resend-after-429"]
