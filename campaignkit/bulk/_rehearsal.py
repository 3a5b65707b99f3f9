"""What a bulk send would do now, done nothing of: ``send_bulk(...,
dry_run=True)`` plans and claims the input in a rehearsal of the ledger
(every rule applied: suppression, send windows, cool-down, open
conversations, the daily limit, each person's sending line) and reports it;
the rehearsal is undone and no request leaves. And ``max_recipients``: a larger input refused before
anything is sent."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterable, Iterable, Sized
from typing import Any

import orjson

from .._input.validation import raise_problems
from .._report import BulkReport
from ..ledger import ACCEPTED, Ledger, Recipients
from ._options import BulkOptions
from ._pipeline import Handed, Producer
from ._rules import lineless


async def rehearse(
    ledger: Ledger, run: str, poll: str, users: Any, options: BulkOptions
) -> BulkReport:
    """The report of sending ``users`` now: those it would send are
    ``accepted`` (sent to no one), the others where the rules put them."""
    lines = options.rules.lines
    shares: Counter[str] = Counter()
    async with ledger.rehearsal() as dry:
        producer = Producer(dry, run, options, input_pass=uuid.uuid4().hex)
        await producer.start(poll)

        async def hand_over(handed: Handed) -> None:
            claim = await dry.claim(run, handed.chunk, owner="dry run")
            if claim is None:
                return
            if lines:  # spread as the send would, in the rehearsal
                recipients = Recipients.of(claim.recipients)
                wires = [orjson.loads(user) for user in recipients.users]
                phones = lineless(recipients.phones, wires)
                shares.update((await dry.assign_lines(phones, lines)).values())
            await dry.settle(run, claim.token, ACCEPTED)

        await producer.run(users, hand_over)
        report = await dry.report(run)
    report.invalid, report.duplicates = producer.planner.invalid, producer.planner.duplicates
    report.lines = {line: shares[line] for line in lines}
    return report


async def bounded(
    users: Iterable[Any] | AsyncIterable[Any], most: int | None
) -> Iterable[Any] | AsyncIterable[Any]:
    """``users``, refused (a :class:`ValidationError` naming
    ``max_recipients``) if it holds more than ``most`` items: read up to
    one more first, before anything is sent (a sized input is not read)."""
    if most is None:
        return users
    if isinstance(users, Sized):
        count = len(users)
        if count > most:
            _refuse(most, f"{count:,} users: more")
        return users
    read: list[Any] = []
    if isinstance(users, AsyncIterable):
        async for item in users:
            read.append(item)
            if len(read) > most:
                _refuse(most, "more")
    else:
        for item in users:
            read.append(item)
            if len(read) > most:
                _refuse(most, "more")
    return read


def _refuse(most: int, found: str) -> None:
    raise_problems(
        [
            (
                "max_recipients",
                f"the input holds {found} than max_recipients={most:,}: nothing was sent "
                "(is it the file you meant? raise max_recipients to send it)",
            )
        ]
    )
