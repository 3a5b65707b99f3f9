"""``runs``' exports: a run's users as a CSV file that ``send`` reads, for a
deliberate retry (rejected, ambiguous, suppressed) or a follow-up run (the recipients
whose deployments ended in chosen failure statuses)."""

from __future__ import annotations

import argparse
import csv
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TextIO

import orjson

from ..errors import ValidationError
from ..ledger import AMBIGUOUS, DEFERRED, REJECTED, SUPPRESSED, Record
from ..ledger._outcomes import failure_statuses
from .context import Ctx
from .files import write_atomically


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
) -> None:
    """Write the users of ``records()`` (the run's, in ``state``) as a CSV
    that ``send`` reads; read twice (the columns, then the rows), never held."""
    keys: dict[str, None] = {}
    async for record in records():
        keys.update(dict.fromkeys(k["key"] for k in _stored(record)["user_session_keys"]))
    columns = ["country_code", "cellphone", "deployment_eta", *keys]

    async def write(f: TextIO) -> int:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        count = 0
        async for record in records():
            user = _stored(record)
            row = {k["key"]: k["value"] for k in user["user_session_keys"]}
            row.update((name, user.get(name, "")) for name in columns[:3])
            writer.writerow(row)
            count += 1
        f.flush()
        return count

    count = await write(ctx.out) if output is None else await write_atomically(output, write)
    if state == AMBIGUOUS:
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
    ctx.note(
        f"wrote {count} {state} users of run {run}{f' to {output}' if output else ''}: {advice}"
    )


def _stored(record: Record) -> dict[str, Any]:
    user: dict[str, Any] = orjson.loads(record.user or "{}")
    return user
