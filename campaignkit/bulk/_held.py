"""Recipients a ledger already holds when a run meets them again: reported
with what the ledger knows, never sent again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Literal

import attrs
import orjson

from .._report import BulkChunk, BulkReport
from ..errors import AmbiguousSendError, CampaignKitError
from ..ledger import ACCEPTED, AMBIGUOUS, IN_FLIGHT, PLANNED, Ledger, Record
from ..models import CampaignAck, User
from ._pacing import PROGRESS_FIELD
from ._sender import ClaimOutcome

TWIN_PATIENCE: Final = 30.0
"""Seconds a send waits at its end for the requests another sender of its run
(a twin) took during it and still has under way, to report their outcome."""

_HELD_OUTCOME: Final[dict[str, Literal["accepted", "rejected", "ambiguous"]]] = {
    ACCEPTED: "accepted",
    IN_FLIGHT: "ambiguous",
    AMBIGUOUS: "ambiguous",
}
_HELD_WHY: Final = {
    IN_FLIGHT: "were in flight (claimed by an earlier run that stopped, or by another "
    "sender of this run)",
    AMBIGUOUS: "were ambiguous in an earlier run",
}


def held_outcome(
    record: Record, users: Sequence[User], acks: Mapping[str, CampaignAck]
) -> ClaimOutcome:
    """The outcome to report for ``users``, held by the ledger as ``record`` is."""
    outcome = _HELD_OUTCOME.get(record.state, "rejected")
    if outcome == "accepted":
        return ClaimOutcome("accepted", ack=acks.get(record.launch_request_id or ""))
    if outcome == "ambiguous":
        why = _HELD_WHY[record.state] + (f" ({record.detail})" if record.detail else "")
        error = AmbiguousSendError(
            f"these users {why}: they may or may not have reached the service, "
            "and were not resent: check before sending again",
            users=users,
        )
        return ClaimOutcome("ambiguous", error=error)
    return ClaimOutcome(
        "rejected",
        error=CampaignKitError(
            f"rejected in an earlier run ({record.detail or 'rejected'}); not resent: "
            "pass retry_rejected=True to send them again"
        ),
    )


def grouped(records: Sequence[Record]) -> list[list[Record]]:
    """``records`` grouped by the request (claim) and state they share."""
    groups: dict[tuple[str | None, str], list[Record]] = {}
    for record in records:
        groups.setdefault((record.claim, record.state), []).append(record)
    return list(groups.values())


async def settle_held(
    report: BulkReport,
    ledger: Ledger,
    run: str,
    *,
    since: float,
    advance: Callable[[Mapping[str, int]], None],
    patience: float = TWIN_PATIENCE,
) -> None:
    """Report the users found in flight (held by another sender of the run)
    with what became of them, rather than all ambiguous.

    Claims taken since ``since`` (the send's start: a live twin's), and users
    the twin planned but has not claimed yet, are waited for, up to
    ``patience`` seconds; older claims (a sender that died) are not. What is
    still planned or in flight then stays ambiguous.
    """
    held = [chunk for chunk in report.ambiguous if chunk.resumed and chunk.users]
    if not held:
        return
    phones = [user.country_code + user.cellphone for chunk in held for user in chunk.users or ()]
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
    acks: dict[str, CampaignAck] = {}
    for _, _, state, ack, _ in await ledger.claims(run):
        if state == ACCEPTED and ack:
            parsed = CampaignAck(**orjson.loads(ack))
            acks[parsed.launch_request_id] = parsed
    keep = report.keeps_accepted_users
    rebuilt = [chunk for old in held for chunk in _rebuilt(old, records, acks, keep)]
    replaced = {id(chunk) for chunk in held}
    report.ambiguous = [chunk for chunk in report.ambiguous if id(chunk) not in replaced]
    for chunk in rebuilt:
        getattr(report, chunk.outcome).append(chunk)
        if chunk.outcome != "ambiguous":
            advance({"ambiguous": -chunk.size, PROGRESS_FIELD[chunk.outcome]: chunk.size})


def _rebuilt(
    chunk: BulkChunk,
    records: Mapping[str, tuple[Record, float | None]],
    acks: Mapping[str, CampaignAck],
    keep_accepted_users: bool,
) -> list[BulkChunk]:
    groups: dict[tuple[str | None, str], list[tuple[User, int]]] = {}
    for user, position in zip(chunk.users or (), chunk.positions, strict=True):
        record, _ = records[user.country_code + user.cellphone]
        state = IN_FLIGHT if record.state == PLANNED else record.state
        groups.setdefault((record.claim, state), []).append((user, position))
    chunks = []
    for members in groups.values():
        users = [user for user, _ in members]
        record, _ = records[users[0].country_code + users[0].cellphone]
        if record.state == PLANNED:  # the twin's, not sent yet as far as we know
            record = attrs.evolve(record, state=IN_FLIGHT)
        result = held_outcome(record, users, acks)
        chunks.append(
            BulkChunk(
                chunk.index,
                record.claim,
                result.outcome,
                len(users),
                ack=result.ack,
                error=result.error,
                resumed=True,
                positions=tuple(position for _, position in members),
                users=None
                if result.outcome == "accepted" and not keep_accepted_users
                else tuple(users),
            )
        )
    return chunks
