"""``suppress``: the suppression list of a delivery ledger (list, add, remove,
import), the numbers no bulk run of the ledger sends to."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._words import counted
from ..errors import ValidationError
from ..ledger import MANUAL, Ledger, Suppression, entry_problems, suppression_phones
from .context import AddCommand, Ctx, ExitStatus, UsageError
from .input import load_users, readable
from .output import table
from .runs import open_ledger, say_if_new

_INDEX = re.compile(r"^phones\[(\d+)\]")


def register(add: AddCommand) -> None:
    p = add(
        "suppress",
        "the suppression list of a delivery ledger: numbers no bulk run sends to",
        "list: the numbers on the list (--json for scripts). add PHONE...: put numbers on it "
        "(with their country code: +573001234567; spaces, dashes and parentheses allowed). "
        "remove PHONE...: take them off (a rerun of a run then sends them). import FILE: "
        "put on it the users of a file as `send` reads it (CSV or JSON; '-' for stdin). "
        "`send --bulk --ignore-suppression` sends to listed numbers for one run. The ledger "
        "must exist (exit 7 otherwise: numbers put on a mistyped ledger would protect "
        "nobody); add and import take --create to start a new ledger with its list.",
    )
    p.add_argument("action", choices=["list", "add", "remove", "import"])
    p.add_argument("items", nargs="*", metavar="PHONE|FILE", help="numbers, or import's file")
    p.add_argument(
        "--journal", required=True, help="the ledger: an SQLite file or a postgresql:// DSN"
    )
    p.add_argument("--reason", help=f"why they are listed (add, import; default: {MANUAL})")
    p.add_argument("--format", choices=["csv", "json"], help="import: default from the file name")
    p.add_argument(
        "--create",
        action="store_true",
        help="add, import: create the ledger if it does not exist (the list of the runs to come)",
    )
    p.set_defaults(func=cmd_suppress, needs_client=False)


async def cmd_suppress(ctx: Ctx) -> ExitStatus:
    a = ctx.args
    _check_usage(a.action, a.items, a.reason, a.format, a.create)
    # Every number (and file, and reason) checked before the ledger is opened,
    # or an SQLite file created.
    if a.action == "import":
        name = readable(a.items[0])
        users = load_users(a.items[0], a.format)  # CSV rows named by line
        phones = _phones(users, [f"{name}: users[{i}]" for i in range(len(users))])
        source: str | None = Path(name).name
    else:
        phones, source = _phones(a.items, [repr(item) for item in a.items]), None
    reason = MANUAL if a.reason is None else a.reason
    if problems := entry_problems(reason, source):
        raise UsageError(f"--{problems[0][0]} {problems[0][1]}")
    async with open_ledger(a.journal, existing=not a.create) as ledger:
        say_if_new(ctx, ledger)
        if a.action == "list":
            await _list(ctx, ledger)
        elif a.action == "remove":
            removed = await ledger.unsuppress(phones)
            absent = len(phones) - removed
            counts = {"removed": removed, "not_listed": absent}
            _done(ctx, counts, f"removed {counted(removed, 'number')}; not on the list: {absent}")
        else:
            added = await ledger.suppress(phones, reason, source=source)
            already = len(phones) - added
            counts = {"added": added, "already_listed": already}
            _done(ctx, counts, f"added {counted(added, 'number')}; on the list already: {already}")
    return ExitStatus.OK


def _check_usage(
    action: str, items: Sequence[str], reason: str | None, fmt: str | None, create: bool
) -> None:
    if action == "list" and items:
        raise UsageError("suppress list takes no PHONE or FILE")
    if action in ("add", "remove") and not items:
        raise UsageError(f"suppress {action} needs at least one PHONE")
    if action == "import" and len(items) != 1:
        raise UsageError("suppress import needs one FILE")
    if reason is not None and action not in ("add", "import"):
        raise UsageError("--reason goes with add or import")
    if fmt is not None and action != "import":
        raise UsageError("--format goes with import")
    if create and action not in ("add", "import"):
        raise UsageError("--create goes with add or import")


def _phones(items: Sequence[Any], names: Sequence[str]) -> list[str]:
    """``items`` as the ledger keys phones; a UsageError naming each bad one."""
    try:
        return suppression_phones(items)
    except ValidationError as exc:
        bad = []
        for path, message in exc.problems:
            found = _INDEX.match(path)
            name = names[int(found[1])] if found else path
            bad.append(f"{name}{path[found.end() :] if found else ''}: {message}")
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise UsageError("; ".join(bad[:3]) + more) from None


def _done(ctx: Ctx, counts: dict[str, int], text: str) -> None:
    if ctx.json:
        ctx.emit(counts)
    else:
        ctx.print(text)


def _entry_json(entry: Suppression) -> dict[str, Any]:
    added = datetime.fromtimestamp(entry.added, UTC).isoformat(timespec="seconds")
    return {"phone": entry.phone, "reason": entry.reason, "source": entry.source, "added": added}


async def _list(ctx: Ctx, ledger: Ledger) -> None:
    entries = [_entry_json(entry) async for entry in ledger.suppressions()]
    if ctx.json:
        ctx.emit(entries)
        return
    if not entries:
        ctx.note(f"the suppression list of {ledger!r} is empty")
        return
    rows = [(e["phone"], e["reason"], e["source"] or "", e["added"]) for e in entries]
    ctx.print(table(rows, ["phone", "reason", "source", "added"]))
    ctx.note(f"{counted(len(entries), 'number')} on the suppression list")
