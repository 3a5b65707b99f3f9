"""Recipients another sender of the run (a twin) had in flight when this send
met them: at its end, a send waits for what became of them, rather than
report them all ambiguous."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from .._input.validation import ledger_phone
from ..ledger import ACCEPTED, AMBIGUOUS, DEFERRED, IN_FLIGHT, PLANNED, SUPPRESSED, Ledger, Record
from ..ledger._build import OUTCOME, Request
from ..models import User
from ._pacing import OUTCOME_STATE

TWIN_PATIENCE: Final = 30.0
"""Seconds a send waits at its end for the requests another sender of its run
(a twin) took during it and still has under way, to report their outcome."""


async def settle_held(
    requests: Sequence[Request],
    ledger: Ledger,
    run: str,
    *,
    since: float,
    advance: Callable[[Mapping[str, int]], None],
    patience: float = TWIN_PATIENCE,
) -> list[Request]:
    """``requests``, with those found in flight (held by another sender of the
    run) replaced by what became of them.

    Claims taken since ``since`` (the send's start: a live twin's), and users
    the twin planned but has not claimed yet, are waited for, up to
    ``patience`` seconds; older claims (a sender that died) are not. What is
    still planned or in flight then stays ambiguous.
    """
    held = [r for r in requests if r.resumed and r.state in (IN_FLIGHT, AMBIGUOUS) and r.users]
    if not held:
        return list(requests)
    phones = [_phone(user) for request in held for user in request.users or ()]
    deadline = time.monotonic() + patience
    while True:
        records = await ledger.held(run, phones)
        # Planned: in a chunk of the twin's, not claimed yet.
        live = any(
            record.state == PLANNED
            or (record.state == IN_FLIGHT and claimed is not None and claimed >= since)
            for record, claimed in records.values()
        )
        if not live or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.1)
    acks = {claim: ack for claim, _, state, ack, _ in await ledger.claims(run) if ack}
    replaced = {id(request) for request in held}
    settled = [request for request in requests if id(request) not in replaced]
    for request in held:
        for again in _regrouped(request, records, acks):
            settled.append(again)
            size = len(again.positions)
            # Suppressed: the twin planned them again, listed since.
            if (outcome := OUTCOME.get(again.state, again.state)) != "ambiguous":
                advance({AMBIGUOUS: -size, OUTCOME_STATE[outcome]: size})
    return settled


def _phone(user: str | User) -> str:
    """The person the ledger keys ``user`` by (its :class:`~campaignkit.Phone`'s key)."""
    assert isinstance(user, User), "a send keeps the users it read"
    phone = ledger_phone(user, "", [])
    assert phone is not None, "a send holds valid users only"
    return phone


def _regrouped(
    request: Request,
    records: Mapping[str, tuple[Record, float | None]],
    acks: Mapping[str, str],
) -> list[Request]:
    # By detail too: suppressed records share no claim, each has its reason.
    groups: dict[tuple[str | None, str, str | None], list[tuple[str | User, int]]] = {}
    for user, position in zip(request.users or (), request.positions, strict=True):
        record, _ = records[_phone(user)]
        # Planned: the twin's, not sent yet as far as we know.
        state = IN_FLIGHT if record.state == PLANNED else record.state
        groups.setdefault((record.claim, state, record.detail), []).append((user, position))
    return [
        Request(
            claim,
            state,
            [position for _, position in members],
            [user for user, _ in members],
            detail=detail,
            ack=acks.get(claim or "") if state == ACCEPTED else None,
        )
        for (claim, state, detail), members in groups.items()
    ]


def lost_record(
    found: Mapping[str, tuple[Record, float | None]], phone: str, position: int
) -> Record:
    """What a chunk's recipient that its claim did not take became: deferred
    (over the daily limit), suppressed (another sender of the run planned it
    again, listed since), or in flight in another sender's claim."""
    record = found.get(phone, (None, None))[0]
    if record is not None and record.state in (DEFERRED, SUPPRESSED):
        return record
    return Record(phone, position, IN_FLIGHT)
