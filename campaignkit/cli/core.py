"""Running a command line: parse, dispatch, turn errors into one line on
stderr and an exit status, with the API key redacted from all of it."""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn, TextIO

from ..config import ENV_API_KEY
from .context import Ctx, ExitStatus, exit_status
from .output import one_line
from .parser import parse


class Redactor:
    """Replaces the given secrets (4 characters or more) by ``***``."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


async def _dispatch(ctx: Ctx) -> int:
    func: Callable[..., Any] = ctx.args.func
    if not ctx.args.needs_client:
        return int(await func(ctx))
    async with ctx.client() as client:
        return int(await func(ctx, client))


def run(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the command line ``argv``; its exit status (``campaignkit --help``)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        args = parse(None if argv is None else list(argv))
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else ExitStatus.USAGE
    redact = Redactor([args.api_key, os.environ.get(ENV_API_KEY)])
    try:
        return asyncio.run(_dispatch(Ctx(args, out, err)))
    except KeyboardInterrupt:
        # Ctrl-C is how a server is stopped: the sandbox, the dashboard, a demo showing it.
        if args.command in ("sandbox", "dashboard") or getattr(args, "dashboard", False):
            err.write(f"{args.command} stopped\n")
            return ExitStatus.OK
        err.write("campaignkit: interrupted\n")
        return ExitStatus.INTERRUPTED
    except Exception as exc:
        if args.debug:
            err.write(redact("".join(traceback.format_exception(exc))))
        err.write(redact(f"campaignkit: error: {one_line(exc)}") + "\n")
        err.flush()
        return exit_status(exc)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of the ``campaignkit`` console script."""
    sys.exit(run(argv))
