"""The one builder of a :class:`~campaignkit.BulkReport`: from what a ledger
holds of each request (its claim, state, detail and ack) and of the inputs
not sent. ``send_bulk``, the workers' ``wait`` and ``campaignkit runs`` all
build their report here, so they agree, errors' classes included."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal

import attrs
import orjson

from .._funnel import build_funnel
from .._input.users import as_user
from .._input.validation import ledger_phone
from .._report import (
    PAUSED,
    BulkChunk,
    BulkReport,
    DuplicateUser,
    InvalidUser,
    SuppressedUser,
    deferral_detail,
)
from ..errors import AmbiguousSendError, CampaignKitError, LedgerError
from ..models import CampaignAck, User
from ._errors import error_from_detail
from ._records import (
    ACCEPTED,
    AMBIGUOUS,
    DEFERRED,
    IN_FLIGHT,
    PLANNED,
    REJECTED,
    STATES,
    SUPPRESSED,
    Record,
    RunPause,
    Skipped,
)

if TYPE_CHECKING:
    from ._ledger import Ledger

Outcome = Literal["accepted", "rejected", "ambiguous", "deferred"]

OUTCOME: Final[dict[str, Outcome]] = {
    PLANNED: "rejected",
    IN_FLIGHT: "ambiguous",
    ACCEPTED: "accepted",
    REJECTED: "rejected",
    AMBIGUOUS: "ambiguous",
    DEFERRED: "deferred",
}
_UNSETTLED: Final = {
    PLANNED: "not sent: still planned (no sender has claimed it yet)",
    IN_FLIGHT: "in flight: its request may be under way or its sender may have died",
    REJECTED: "rejected",
    AMBIGUOUS: "ambiguous",
}


_HELD_WHY: Final = {
    IN_FLIGHT: "were in flight (claimed by an earlier run that stopped, or by another "
    "sender of this run)",
    AMBIGUOUS: "were ambiguous in an earlier run",
}


@attrs.frozen
class Request:
    """Recipients that share one outcome: those of one claim in one state.

    ``users`` are their users (wire JSON, or :class:`User` objects where the
    caller has them), in the order of ``positions``; ``resumed`` marks
    recipients this call did not send (held from an earlier run, or taken by
    another sender); ``error`` the live error, where the caller has it
    (otherwise it is rebuilt from ``detail``).
    """

    claim: str | None
    state: str
    positions: Sequence[int]
    users: Sequence[str | User] | None
    detail: str | None = None
    ack: str | None = None
    resumed: bool = True
    error: CampaignKitError | None = None


def requests_of(records: Iterable[Record], acks: Mapping[str, str]) -> list[Request]:
    """``records`` grouped by claim and state (deferred ones by their
    reason's detail too), in order of first appearance (suppressed ones are
    no request's: see :func:`suppressed_of`)."""
    groups: dict[tuple[str | None, str, str | None], list[Record]] = {}
    for record in records:
        if record.state != SUPPRESSED:
            why = record.detail if record.state == DEFERRED else None
            groups.setdefault((record.claim, record.state, why), []).append(record)
    return [
        Request(
            claim,
            state,
            [r.position for r in group],
            [r.user or "{}" for r in group],
            detail=group[0].detail,
            ack=acks.get(claim or "") if state == ACCEPTED else None,
        )
        for (claim, state, _), group in groups.items()
    ]


def suppressed_of(records: Iterable[Record]) -> list[SuppressedUser]:
    """The suppressed ones of ``records``, as the report lists them."""
    return [
        SuppressedUser(r.position, r.phone, r.detail or "", user_of(r.user or "{}"))
        for r in records
        if r.state == SUPPRESSED
    ]


def _suppressed_users(request: Request) -> list[SuppressedUser]:
    users = [user_of(user) for user in request.users or ()]
    return [
        SuppressedUser(position, ledger_phone(user, "", []) or "", request.detail or "", user)
        for position, user in zip(request.positions, users, strict=True)
    ]


def user_of(user: str | User) -> User:
    if isinstance(user, User):
        return user
    built, reason = as_user(orjson.loads(user))
    if built is None:
        raise LedgerError(f"a user in the ledger cannot be read: {reason}")
    return built


def chunk_of(index: int, request: Request, *, keep_accepted_users: bool = False) -> BulkChunk:
    """The :class:`BulkChunk` ``request`` is reported as."""
    outcome = OUTCOME[request.state]
    keep = outcome != "accepted" or keep_accepted_users
    users = tuple(user_of(u) for u in request.users) if keep and request.users else ()
    error = request.error
    if outcome == "deferred":
        error = CampaignKitError(request.detail or "deferred: over the daily limit")
    elif error is None and outcome != "accepted":
        detail = request.detail or _UNSETTLED[request.state]
        error = error_from_detail(detail, users=users)
        if outcome == "ambiguous" and request.resumed:
            why = _HELD_WHY[request.state] + (f" ({request.detail})" if request.detail else "")
            error = AmbiguousSendError(
                f"these users {why}: they may or may not have reached the service, "
                "and were not resent: check before sending again",
                users=users,
                cause=error,
            )
        elif outcome == "ambiguous" and not isinstance(error, AmbiguousSendError):
            error = AmbiguousSendError(detail, users=users, cause=error)
        elif request.resumed and request.state != PLANNED:
            error.add_note(
                "rejected in an earlier run; not resent: pass retry_rejected=True "
                "to send them again"
            )
    return BulkChunk(
        index,
        request.claim,
        outcome,
        len(request.positions),
        ack=CampaignAck(**orjson.loads(request.ack)) if request.ack else None,
        error=error,
        resumed=request.resumed,
        positions=request.positions,
        users=users if keep else None,
    )


def skipped_users(items: Iterable[Skipped]) -> tuple[list[InvalidUser], list[DuplicateUser]]:
    """The invalid and the repeated inputs a run skipped, as a report lists them."""
    invalid, duplicates = [], []
    for item in items:
        if item.kind == "duplicate":
            user = user_of(item.item or "{}")
            duplicates.append(DuplicateUser(item.position, item.phone or "", user))
        else:
            value = None if item.item is None else orjson.loads(item.item)
            invalid.append(InvalidUser(item.position, item.reason or "invalid", item.line, value))
    return invalid, duplicates


def state_counts(
    requests: Iterable[Request],
    suppressed: Sequence[SuppressedUser],
    invalid: Sequence[InvalidUser],
    duplicates: Sequence[DuplicateUser],
) -> dict[str, int]:
    """How many of a report's inputs are in each state (and invalid, duplicate)."""
    counts = dict.fromkeys((*STATES, "invalid", "duplicate"), 0)
    for request in requests:
        counts[request.state] += len(request.positions)
    counts[SUPPRESSED] += len(suppressed)
    counts["invalid"], counts["duplicate"] = len(invalid), len(duplicates)
    return counts


def build_report(
    poll: str,
    requests: Iterable[Request],
    *,
    invalid: Sequence[InvalidUser] = (),
    duplicates: Sequence[DuplicateUser] = (),
    suppressed: Sequence[SuppressedUser] = (),
    total: int | None = None,
    elapsed: float = 0.0,
    keep_accepted_users: bool = False,
) -> BulkReport:
    """The report of ``requests`` and the inputs not sent; chunks in input order."""
    report = BulkReport(poll, keeps_accepted_users=keep_accepted_users)
    ordered = sorted(requests, key=lambda r: min(r.positions, default=-1))
    # Suppressed users were no request's: each is listed on its own.
    sent = [request for request in ordered if request.state != SUPPRESSED]
    for index, request in enumerate(sent):
        chunk = chunk_of(index, request, keep_accepted_users=keep_accepted_users)
        getattr(report, chunk.outcome).append(chunk)
    suppressed = [
        *suppressed,
        *(user for r in ordered if r.state == SUPPRESSED for user in _suppressed_users(r)),
    ]
    report.invalid = sorted(invalid, key=lambda item: item.position)
    report.duplicates = sorted(duplicates, key=lambda item: item.position)
    report.suppressed = sorted(suppressed, key=lambda item: item.position)
    counted = sum(report.counts.values())
    report.total = max(total or 0, counted)
    report.elapsed = elapsed
    return report


def paused_request(request: Request, pause: RunPause) -> Request:
    """A paused run's request as its report shows it: its planned
    recipients deferred (``paused``), sent once the run is resumed."""
    if request.state != PLANNED:
        return request
    why = f"{pause.reason}: {pause.detail}; resuming the run sends them"
    return attrs.evolve(request, state=DEFERRED, detail=deferral_detail(PAUSED, why))


async def read_report(ledger: Ledger, run: str) -> BulkReport:
    """The run's report, read from ``ledger`` (see :meth:`Ledger.report`)."""
    info = await ledger.run_info(run)
    if info is None:
        raise LedgerError(f"this ledger has no run {run!r}")
    acks = {claim: ack for claim, _, _, ack, _ in await ledger.claims(run) if ack}
    requests, suppressed, last = await ledger.store.report_groups(run, acks)
    if info.paused is not None:
        requests = [paused_request(request, info.paused) for request in requests]
    invalid, duplicates = skipped_users(await ledger.skipped(run))
    report = build_report(
        info.poll,
        requests,
        invalid=invalid,
        duplicates=duplicates,
        suppressed=suppressed,
        total=info.total,
        elapsed=max(0.0, (last or info.created) - info.created),
    )
    # The recipients counted as read for the report: one reading of the
    # run, not a second (a whole run's, without an index of states).
    counts = state_counts(requests, suppressed, invalid, duplicates)
    report.funnel = build_funnel(counts, await ledger.outcome_groups(run))
    if info.stopped is not None:
        report.fatal = error_from_detail(info.stopped)
    if info.paused is not None:
        report.paused = f"{info.paused.reason}: {info.paused.detail}"
    return report
