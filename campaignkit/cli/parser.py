"""The command line's parser: global options, accepted before or after the
command name, and one subcommand per command of the command modules."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._redaction import redact
from .._version import __version__
from ..config import ENV_API_KEY, ENV_URLS
from . import (
    analyze,
    demo,
    polls,
    runs,
    sandbox,
    send,
    sessions,
    submit,
    suppress,
    track,
    watch,
    worker,
)
from .argtypes import positive_float
from .context import EPILOG, ExitStatus

COMMANDS = (
    demo,
    sandbox,
    send,
    submit,
    track,
    sessions,
    polls,
    worker,
    runs,
    suppress,
    watch,
    analyze,
)

COMMON_DEFAULTS: dict[str, Any] = {
    "api_key": None,
    "base_url": None,
    "campaign_url": None,
    "agent_url": None,
    "timeout": None,
    "max_retries": None,
    "resend_after_429": True,
    "json": False,
    "quiet": False,
    "debug": False,
}


class Parser(argparse.ArgumentParser):
    """argparse with the CLI's usage exit status."""

    def error(self, message: str) -> NoReturn:
        # Redacted: a key typed where a command or value belongs is quoted back.
        self.print_usage(sys.stderr)
        self.exit(ExitStatus.USAGE, redact(f"{self.prog}: error: {message}\n"))


class CommandParser(Parser):
    """A command's parser: options and positionals in any order, as its usage
    line shows them or as typed (``suppress add --journal J +573001234567``).
    Plain argparse would end a ``*`` or ``?`` positional at the first option
    and reject the values after it."""

    _intermixing = False

    def parse_known_args(  # type: ignore[override]  # typeshed's overloads
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # parse_known_intermixed_args calls parse_known_args for each of its
        # two passes: those are argparse's own.
        if self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def _common() -> Parser:
    # Defaults suppressed: a value given before the command survives the
    # subparser; parse() fills in COMMON_DEFAULTS afterwards.
    common = Parser(add_help=False)
    s = argparse.SUPPRESS
    g = common.add_argument_group("connection (default: the CAMPAIGNKIT_* variables)")
    g.add_argument("--api-key", default=s, help=f"API key (prefer {ENV_API_KEY})")
    g.add_argument("--base-url", default=s, help=f"main host ({ENV_URLS['base_url']})")
    g.add_argument("--campaign-url", default=s, help=f"campaign host ({ENV_URLS['campaign_url']})")
    g.add_argument("--agent-url", default=s, help=f"agent host ({ENV_URLS['agent_url']})")
    g.add_argument("--timeout", type=positive_float, default=s, help="seconds per request")
    g.add_argument("--max-retries", type=int, default=s, help="retries of a failed read")
    g.add_argument(
        "--no-resend-after-429",
        dest="resend_after_429",
        action="store_false",
        default=s,
        help="a send answered 429 is ambiguous, never resent (for a gateway that may "
        "answer 429 after the service acted)",
    )
    o = common.add_argument_group("output")
    o.add_argument("--json", action="store_true", default=s, help="machine-readable output")
    o.add_argument("-q", "--quiet", action="store_true", default=s, help="no progress/notes")
    o.add_argument("--debug", action="store_true", default=s, help="tracebacks on errors")
    return common


def build_parser() -> Parser:
    common = _common()
    parser = Parser(
        prog="campaignkit",
        description="Send, track and inspect campaigns of the Conversation Campaign and "
        "Session Service; `campaignkit demo` shows it all on a local sandbox.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"campaignkit {__version__}")
    sub: argparse._SubParsersAction[Parser] = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=CommandParser
    )

    def add(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help,
            description=description or help,
            parents=[common],
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    for module in COMMANDS:
        module.register(add)
    return parser


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments, global options defaulted; SystemExit for --help,
    --version and usage errors, as argparse does."""
    args = build_parser().parse_args(argv)
    for name, default in COMMON_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, default)
    return args
