"""Running a command line: parse, dispatch, turn errors into one line on
stderr and an exit status, with the API key redacted from all of it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from .._redaction import redact, register
from ..config import ENV_API_KEY
from .context import Ctx, ExitStatus, exit_status
from .output import one_line
from .parser import parse


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
    words = sys.argv[1:] if argv is None else list(argv)
    # Registered before anything runs, parsing included (its usage errors
    # quote what they refuse): a bad key never reaches a ClientConfig either.
    register(os.environ.get(ENV_API_KEY))
    for flag, value in itertools.pairwise(words):
        if flag == "--api-key":
            register(value)
    for word in words:
        if word.startswith("--api-key="):
            register(word.removeprefix("--api-key="))
    try:
        args = parse(words)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else ExitStatus.USAGE
    register(args.api_key)
    try:
        return asyncio.run(_dispatch(Ctx(args, out, err)))
    except KeyboardInterrupt:
        # Ctrl-C is how a server is stopped: the sandbox, the dashboard, a demo showing it.
        if args.command in ("sandbox", "dashboard") or getattr(args, "dashboard", False):
            err.write(f"{args.command} stopped\n")
            return ExitStatus.OK
        err.write("campaignkit: interrupted\n")
        return ExitStatus.INTERRUPTED
    except BrokenPipeError:
        # The reader of the output left (`| head`): stop quietly, as a pipe's
        # writer does; the output still buffered is dropped, not written at exit.
        with contextlib.suppress(OSError, ValueError):
            fd = out.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        return ExitStatus.OK
    except Exception as exc:
        if args.debug:
            err.write(redact("".join(traceback.format_exception(exc))))
        err.write(redact(f"campaignkit: error: {one_line(exc)}") + "\n")
        err.flush()
        return exit_status(exc)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of the ``campaignkit`` console script."""
    sys.exit(run(argv))
