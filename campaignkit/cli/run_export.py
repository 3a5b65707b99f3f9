"""``runs``' exports: a run's users as a file that ``send`` reads (CSV, or
JSON Lines), for a deliberate retry (rejected, ambiguous, suppressed), a
follow-up run (the recipients whose deployments ended in chosen failure
statuses), or the record of the whole run (``all``: every recipient, with
what became of it). A CSV is safe to open in a spreadsheet: no cell runs as
a formula, and ``send`` reads each cell back as it was."""

from __future__ import annotations

import argparse
import csv
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import orjson

from .._input.csv_files import RUN_COLUMNS, spreadsheet_cell
from .._input.users import RUN_FIELD
from .._words import listed
from ..errors import ValidationError
from ..ledger import AMBIGUOUS, DEFERRED, REJECTED, SUPPRESSED, Record
from ..ledger._outcomes import RecipientOutcome, failure_statuses
from .context import Ctx, UsageError
from .files import write_atomically

ALL = "all"
"""``--export all``: every recipient of the run, with its state and outcome."""
FORMATS = ("csv", "jsonl")
_USER_COLUMNS = ("country_code", "cellphone", "deployment_eta")


def export_format(chosen: str | None, output: Path | None) -> str:
    """``--format``, else JSON Lines for an ``-o`` file named ``.jsonl``, else CSV."""
    if chosen is not None:
        return chosen
    return "jsonl" if output is not None and output.suffix.lower() == ".jsonl" else "csv"


def failure_status_list(text: str) -> list[str]:
    """``--export-status``: failure statuses, comma-separated."""
    names = [name.strip().upper() for name in text.split(",") if name.strip()]
    try:
        failure_statuses(names)
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(exc.problems[0][1]) from None
    return names


async def export_run(
    ctx: Ctx,
    records: Callable[[], AsyncIterator[Record]],
    run: str,
    state: str,
    output: Path | None,
    fmt: str,
    outcomes: Mapping[str, RecipientOutcome] | None = None,
) -> None:
    """Write the users of ``records()`` (the run's, in ``state``) as a file
    that ``send`` reads; with ``outcomes`` (``all``), each recipient's facts
    in the run after its user (``run.*``). Read twice for a CSV (the
    columns, then the rows), never held."""
    keys: dict[str, None] = {}
    if fmt == "csv":
        async for record in records():
            keys.update(dict.fromkeys(_session_variables(_stored(record))))
    run_columns = () if outcomes is None else RUN_COLUMNS
    taken = sorted(set(keys).intersection([*_USER_COLUMNS, *run_columns]))
    if taken:
        raise UsageError(
            f"run {run} has {listed('session variable', [repr(name) for name in taken])}, "
            "named as the export's own columns: export them as JSON Lines (--format jsonl)"
        )
    columns = [*_USER_COLUMNS, *keys, *run_columns]

    async def write(f: TextIO) -> int:
        writer = csv.writer(f) if fmt == "csv" else None
        if writer is not None:
            writer.writerow(map(spreadsheet_cell, columns))
        count = 0
        async for record in records():
            user = _stored(record)
            facts = None if outcomes is None else _run_facts(record, outcomes.get(record.phone))
            if writer is None:
                line = user if facts is None else {**user, RUN_FIELD: facts}
                f.write(orjson.dumps(line).decode() + "\n")
            else:
                cells: dict[str, Any] = _session_variables(user)
                cells.update((name, user.get(name)) for name in _USER_COLUMNS)
                cells.update(
                    (f"{RUN_FIELD}.{fact}", value) for fact, value in (facts or {}).items()
                )
                writer.writerow(spreadsheet_cell(_text(cells.get(name))) for name in columns)
            count += 1
        f.flush()
        return count

    count = await write(ctx.out) if output is None else await write_atomically(output, write)
    if state == ALL:
        advice = (
            "every recipient with its state and outcome (the run.* columns); `send` reads "
            "it back as the run's input"
        )
    elif state == AMBIGUOUS:
        advice = "they may have been received: check before sending them again"
    elif state == REJECTED:
        advice = "send them again with `campaignkit send POLL FILE --bulk`"
    elif state == SUPPRESSED:
        advice = "their numbers were on the suppression list (`campaignkit suppress list`)"
    elif state == DEFERRED:
        advice = (
            "over the daily limit, or with no time zone to hold the send window in (give "
            "them a 'tz'): rerunning the run sends them once that allows"
        )
    else:
        advice = "send them in a follow-up run with `campaignkit send POLL FILE --bulk --run NEW`"
    what = "recipients" if state == ALL else f"{state} users"
    ctx.note(f"wrote {count} {what} of run {run}{f' to {output}' if output else ''}: {advice}")


def _run_facts(record: Record, outcome: RecipientOutcome | None) -> dict[str, str | None]:
    """What became of one recipient (``RUN_FACTS``), times in ISO 8601 UTC."""
    known = outcome or RecipientOutcome(record.phone)
    return {
        "phone": record.phone,
        "state": record.state,
        "launch": record.launch_request_id,
        "status": None if known.status is None else known.status.value,
        "status_at": _iso(known.status_at),
        "delivered_at": _iso(known.delivered_at),
        "read_at": _iso(known.read_at),
        "replied_at": _iso(known.replied_at),
        "opted_out_at": _iso(known.opted_out_at),
        "error": record.detail,
    }


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _session_variables(user: dict[str, Any]) -> dict[str, str]:
    return {k["key"]: k["value"] for k in user.get("user_session_keys", ())}


def _stored(record: Record) -> dict[str, Any]:
    user: dict[str, Any] = orjson.loads(record.user or "{}")
    return user
