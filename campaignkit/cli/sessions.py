"""``sessions`` (every page, as JSON Lines or CSV) and ``history``."""

from __future__ import annotations

import csv
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import orjson

from .._input.csv_files import spreadsheet_cell
from .._words import counted
from ..client import CampaignClient
from ..models import SessionMeta
from .argtypes import add_session_range
from .context import AddCommand, Ctx, ExitStatus, UsageError
from .files import write_atomically
from .output import Progress, format_history

SESSION_CSV_COLUMNS = ("id", "created_at", "finished_at", "country_code", "cellphone")


def register(add: AddCommand) -> None:
    p = add(
        "sessions",
        "export every session of a poll (all pages) as JSON Lines or CSV",
        "Export every session of POLL_ID, following the pagination cursor. Without "
        "--since/--until the service answers the current year.",
    )
    p.add_argument("poll_id")
    add_session_range(p, "1..10000 (service default: 1000)")
    p.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    p.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    p.set_defaults(func=cmd_sessions, needs_client=True)

    p = add("history", "the message history of a session")
    p.add_argument("session_id")
    p.set_defaults(func=cmd_history, needs_client=True)


async def cmd_history(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    history = await client.get_session_history(ctx.args.session_id)
    if ctx.json:
        ctx.emit(history)
    else:
        ctx.print(format_history(history))
    return ExitStatus.OK


async def cmd_sessions(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    a = ctx.args
    if a.page_size is not None and not 1 <= a.page_size <= 10000:
        raise UsageError("--page-size must be between 1 and 10000")
    if a.since is not None and a.until is not None and a.until < a.since:
        raise UsageError("--until is before --since")
    sessions = client.iter_sessions(a.poll_id, start=a.since, end=a.until, page_size=a.page_size)

    async def write(f: TextIO) -> int:
        return await write_sessions(ctx, sessions, f, a.format)

    if a.output is None:
        await write(ctx.out)
    else:
        count = await write_atomically(a.output, write)
        ctx.note(f"wrote {counted(count, 'session')} to {a.output}")
    return ExitStatus.OK


def _iso(value: datetime | None) -> str:
    return "" if value is None else value.isoformat()


def session_record(s: SessionMeta) -> dict[str, Any]:
    return {
        "id": s.id,
        "created_at": _iso(s.created_at),
        "finished_at": _iso(s.finished_at) or None,
        "user": {"country_code": s.user.country_code, "cellphone": s.user.cellphone},
    }


async def write_sessions(
    ctx: Ctx, sessions: AsyncIterator[SessionMeta], f: TextIO, fmt: str
) -> int:
    count = 0
    writer = csv.writer(f) if fmt == "csv" else None
    if writer is not None:
        writer.writerow(SESSION_CSV_COLUMNS)
    # Progress goes to stderr; skip it when the data itself goes to the terminal.
    to_terminal = f is ctx.out and bool(getattr(ctx.out, "isatty", lambda: False)())
    with Progress(ctx.err, "sessions", enabled=not ctx.args.quiet and not to_terminal) as progress:
        async for s in sessions:
            if writer is not None:
                cells = (
                    s.id,
                    _iso(s.created_at),
                    _iso(s.finished_at),
                    s.user.country_code,
                    s.user.cellphone,
                )
                writer.writerow(map(spreadsheet_cell, cells))
            else:
                f.write(orjson.dumps(session_record(s)).decode() + "\n")
            count += 1
            if count % 1000 == 0:
                progress.update(count, None, "exported")
        progress.update(count, None, "exported")
    f.flush()
    return count
