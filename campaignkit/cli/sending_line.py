"""The options that protect the sending line, shared by the commands that
start a bulk run (``send --bulk``, and ``submit`` for the workers): the
canary's among them, which holds for the workers as for one process."""

from __future__ import annotations

import argparse
from typing import Any

from .._guards import Breaker, Canary
from ..bulk import SendWindow, zone_named
from ..errors import ValidationError
from .argtypes import duration, positive_int, share
from .context import UsageError


def add_options(parser: argparse.ArgumentParser | Any) -> None:
    group = parser.add_argument_group(
        "protecting the sending line (each recipient's local time, daily limit, lines)"
    )
    group.add_argument(
        "--send-window",
        metavar="HH:MM-HH:MM",
        help="send only inside this window of each recipient's local time (their zone from "
        "the number, or a 'tz' column); outside it, deployment_eta is its next opening",
    )
    group.add_argument(
        "--days", metavar="DAYS", help="the window's weekdays, e.g. mon-fri or sat,sun"
    )
    group.add_argument(
        "--default-tz",
        metavar="ZONE",
        help="the zone (e.g. America/Bogota) that times a number the window cannot be held "
        "for in its own zones (none known, or none sharing an hour of it); without it they "
        "are deferred ('zone unknown'), and a rerun sends those given a 'tz'",
    )
    group.add_argument(
        "--daily-limit",
        type=positive_int,
        metavar="N",
        help="at most N unique recipients per rolling 24 h over every run of the journal; "
        "the rest are deferred, and a rerun sends them once the budget allows",
    )
    group.add_argument(
        "--line",
        action="append",
        dest="lines",
        metavar="NUMBER",
        help="a sending number (country code included, digits only); repeat it to spread "
        "recipients evenly over several, each person kept on their line",
    )
    group.add_argument(
        "--cooldown",
        type=duration,
        metavar="DURATION",
        help="defer people any run of the journal messaged within this time (24h, 90m, 1h30m, "
        "2d: d days, h hours, m minutes, s seconds) unless they replied since ('cooldown')",
    )
    group.add_argument(
        "--skip-open-conversations",
        action="store_true",
        help="defer people who answered within the last 24 h ('open conversation')",
    )
    group.add_argument(
        "--breaker",
        type=_breaker,
        metavar="SHARE/N",
        help="pause the run when more than SHARE (0 to 1) of its last N settled recipients "
        "failed, e.g. 0.2/500; `campaignkit runs RUN --resume` goes on",
    )
    canary = parser.add_argument_group(
        "canary: the first recipients alone, the rest only if they hold (with `submit`, it "
        "returns once the canary is judged, having followed it: it needs the API key)"
    )
    canary.add_argument(
        "--canary",
        type=positive_int,
        metavar="N",
        help="send the first N recipients, follow them, and send the rest only if their "
        "outcomes hold; otherwise pause the run (`campaignkit runs RUN --resume` goes on)",
    )
    canary.add_argument(
        "--canary-wait",
        type=duration,
        metavar="DURATION",
        help="how long the canary is followed at most (15m, 1h: d, h, m, s; default 15m)",
    )
    canary.add_argument(
        "--canary-min-delivered",
        type=share,
        metavar="SHARE",
        help="the share of the canary delivered within the wait (0 to 1; default 0.8)",
    )
    canary.add_argument(
        "--canary-max-failed",
        type=share,
        metavar="SHARE",
        help="the share of the canary that may fail (0 to 1; default 0.05)",
    )


def given(args: argparse.Namespace) -> list[str]:
    """The flags of these options that were given."""
    names = (
        ("--send-window", args.send_window),
        ("--days", args.days),
        ("--default-tz", args.default_tz),
        ("--daily-limit", args.daily_limit),
        ("--line", args.lines),
        ("--cooldown", args.cooldown),
        ("--skip-open-conversations", args.skip_open_conversations),
        ("--breaker", args.breaker),
        ("--canary", args.canary),
        ("--canary-wait", args.canary_wait),
        ("--canary-min-delivered", args.canary_min_delivered is not None),
        ("--canary-max-failed", args.canary_max_failed is not None),
    )
    return [flag for flag, value in names if value]


def options(args: argparse.Namespace) -> dict[str, Any]:
    """``send_window``, ``default_tz``, ``daily_limit``, ``lines`` and the
    guards (``cooldown``, ``skip_open_conversations``, ``breaker``,
    ``canary``) for ``send_bulk`` or ``submit``."""
    for flag, value in (("--days", args.days), ("--default-tz", args.default_tz)):
        if value and not args.send_window:
            raise UsageError(f"{flag} needs --send-window")
    if args.default_tz and zone_named(args.default_tz) is None:
        raise UsageError(f"--default-tz: {args.default_tz!r} is no time zone (e.g. America/Bogota)")
    try:
        window = None if args.send_window is None else SendWindow.parse(args.send_window, args.days)
    except ValidationError as exc:
        raise UsageError(
            "--send-window/--days: " + "; ".join(message for _, message in exc.problems)
        ) from None
    return {
        "send_window": window,
        "default_tz": args.default_tz,
        "daily_limit": args.daily_limit,
        "lines": args.lines,
        "cooldown": args.cooldown,
        "skip_open_conversations": args.skip_open_conversations,
        "breaker": args.breaker,
        "canary": _canary(args),
    }


def _canary(args: argparse.Namespace) -> Canary | None:
    """The --canary and its --canary-* flags, as a Canary (None without it)."""
    given = {
        name: value
        for name, value in (
            ("wait", args.canary_wait),
            ("min_delivered", args.canary_min_delivered),
            ("max_failed", args.canary_max_failed),
        )
        if value is not None
    }
    if args.canary is None:
        if given:
            flags = ", ".join(f"--canary-{name.replace('_', '-')}" for name in given)
            raise UsageError(f"{flags} need --canary N")
        return None
    return Canary(size=args.canary, **given)


def _breaker(text: str) -> Breaker:
    share, _, over = text.partition("/")
    try:
        return Breaker(max_failed=float(share), over=int(over))
    except (ValueError, ValidationError):
        raise argparse.ArgumentTypeError(
            f"expected SHARE/N, the share of failures (0 to 1) of the last N settled "
            f"recipients that pauses the run, e.g. 0.2/500; got {text!r}"
        ) from None
