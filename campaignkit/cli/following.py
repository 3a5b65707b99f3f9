"""What the commands that follow a run share: ``--follow-timeout`` (``runs
RUN --follow``, ``send --bulk --follow``), and ``runs``' follow."""

from __future__ import annotations

import argparse

from .._funnel import Funnel
from .._words import counted
from ..bulk import follow_run
from ..ledger import Ledger
from .argtypes import positive_float
from .context import Ctx, UsageError
from .interrupt import connection_flags
from .output import command_line


def add_follow_timeout(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        "--follow-timeout",
        type=positive_float,
        metavar="SECONDS",
        help="with --follow: stop following after this many seconds, keeping what was "
        "read (`runs RUN --follow` again resumes); default: until every launch settles",
    )


def check_follow_timeout(a: argparse.Namespace) -> None:
    if a.follow_timeout is not None and not a.follow:
        raise UsageError("--follow-timeout needs --follow")


async def follow_first(ctx: Ctx, ledger: Ledger) -> None:
    """``runs RUN --follow``: the run's outcomes learnt before it is shown."""
    a = ctx.args
    most = "" if a.follow_timeout is None else f" (at most {a.follow_timeout:g} s)"
    ctx.note(f"following run {a.run}: until every accepted launch settles{most}...")
    async with ctx.client() as client:
        await follow_run(
            client,
            ledger,
            a.run,
            concurrency=a.follow_concurrency,
            follow_timeout=a.follow_timeout,
        )


def note_unconfirmed(ctx: Ctx, funnel: Funnel, run: str) -> None:
    """After following a run: how many accepted recipients have no outcome
    confirmed yet, and the command that reads them later. Following stops
    once every launch has *settled*, and a message sent but not yet
    confirmed delivered (``SUCCESS``) is settled."""
    unconfirmed = funnel.accepted - funnel.delivered - sum(funnel.failed.values())
    if unconfirmed <= 0:
        return
    a = ctx.args
    later = ""
    if a.journal:
        again = command_line("runs", run, "--journal", a.journal, "--follow", *connection_flags(a))
        later = f"; later, {again} reads what became of them"
    ctx.note(
        f"{counted(unconfirmed, 'accepted recipient')} not confirmed delivered yet "
        f"(sent, or on their way){later}"
    )
