"""What a ledger holds, as plain frozen records."""

from __future__ import annotations

import operator
import shlex
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from typing import Any, Final, overload

import attrs

PLANNED: Final = "planned"
IN_FLIGHT: Final = "in_flight"
ACCEPTED: Final = "accepted"
REJECTED: Final = "rejected"
AMBIGUOUS: Final = "ambiguous"
SUPPRESSED: Final = "suppressed"
"""Not sent: the number is on the ledger's suppression list (the reason in ``detail``)."""
DEFERRED: Final = "deferred"
"""Not sent yet, for the reason its detail names (over the daily limit, or no
zone to hold a send window in); a rerun sends it once that allows."""
STATES: Final = (PLANNED, IN_FLIGHT, ACCEPTED, REJECTED, AMBIGUOUS, SUPPRESSED, DEFERRED)


@attrs.frozen(order=True)
class Recipient:
    """One recipient of a run: ``phone`` is the person's :class:`~campaignkit.Phone`
    key (``+573001234567``); ``user`` the wire JSON of its user."""

    phone: str
    position: int
    """Its 0-based position in the input that planned it."""
    user: str = attrs.field(repr=False, order=False)


@attrs.frozen(eq=False)
class Recipients(Sequence[Recipient]):
    """Recipients as three parallel columns (phones, input positions, user
    JSON): what a chunk of ``send_bulk`` plans and the memory ledger keeps and
    claims, with no object a recipient (row 6n of the benchmarks). A
    :class:`Recipient` is made only for whoever reads one."""

    phones: Sequence[str]
    positions: Sequence[int]
    users: Sequence[str]

    @classmethod
    def of(cls, recipients: Sequence[Recipient]) -> Recipients:
        """``recipients`` as columns (themselves if they are)."""
        if isinstance(recipients, Recipients):
            return recipients
        return cls(
            [r.phone for r in recipients],
            [r.position for r in recipients],
            [r.user for r in recipients],
        )

    def __len__(self) -> int:
        return len(self.phones)

    @overload
    def __getitem__(self, index: int) -> Recipient: ...

    @overload
    def __getitem__(self, index: slice) -> Recipients: ...

    def __getitem__(self, index: int | slice) -> Recipient | Recipients:
        if isinstance(index, slice):
            return Recipients(self.phones[index], self.positions[index], self.users[index])
        return Recipient(self.phones[index], self.positions[index], self.users[index])

    def __iter__(self) -> Iterator[Recipient]:
        return map(Recipient, self.phones, self.positions, self.users)

    def __eq__(self, other: object) -> bool:
        """Equal to a sequence of the same recipients, in the same order."""
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(map(operator.eq, self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{len(self)} recipients>"


@attrs.frozen
class Record:
    """A recipient's record: its state and what the ledger knows of it."""

    phone: str
    position: int
    state: str
    launch_request_id: str | None = None
    detail: str | None = None
    """Why it was rejected or is ambiguous."""
    user: str | None = attrs.field(default=None, repr=False)
    claim: str | None = None
    """The claim that last took it into a request."""


@attrs.frozen
class Claim:
    """Recipients taken for one request: ``token`` names the claim; it expires
    (its recipients are then reported ambiguous) at ``expires`` (UNIX seconds)."""

    token: str
    chunk: str
    recipients: Sequence[Recipient] = attrs.field(repr=lambda r: f"<{len(r)} recipients>")
    expires: float = 0.0
    run: RunInfo | None = None
    """The run as the claim's transaction read it (its poll, the fatal answer
    that had stopped it): its sender needs no other read before the request
    leaves. None in a claim made otherwise than by a ledger's ``claim``."""
    options: Mapping[str, Any] = attrs.field(factory=dict, repr=False)
    """The run's options as the claim's transaction read them (see
    :meth:`~campaignkit.ledger.Ledger.save_run_options`)."""


@attrs.frozen
class RunPause:
    """Why a run is paused (``reason``: ``breaker``, ``canary``, ``template``
    or ``manual``; ``detail``: its figures), since ``paused_at`` (UNIX
    seconds). No sender takes anything more of a paused run until it is
    resumed (:meth:`~campaignkit.ledger.Ledger.resume_run`)."""

    reason: str
    detail: str
    paused_at: float

    @staticmethod
    def command(run: str, journal: str) -> str:
        """The command that resumes ``run`` of the ledger ``journal``."""
        return f"campaignkit runs {shlex.quote(run)} --journal {shlex.quote(journal)} --resume"


@attrs.frozen
class RunInfo:
    """A run: the poll it sends, when it started, whether its producer has
    planned the whole input (``total`` items) yet, and the fatal answer that
    ended it, if one did."""

    run: str
    poll: str
    created: float
    total: int | None = None
    input_done: bool = False
    stopped: str | None = None
    """The fatal answer that ended the run (``<ErrorClass>: <message>``, as a
    rejected recipient's ``detail``): nothing more of it is sent."""
    paused: RunPause | None = None
    """Why the run is paused, if it is: nothing more of it is sent until it is resumed."""
    canary_judged: float | None = None
    """When the run's canary was taken to judgement (UNIX seconds), if it
    was: no later send of the run gates it again."""

    @classmethod
    def of_row(cls, row: Sequence[Any]) -> RunInfo:
        """The run of an SQL store's row: run, poll, created, total, input
        done, stop detail, (its input pass,) pause reason, detail and time,
        canary judged."""
        name, poll, created, total, done, stopped = row[:6]
        reason, detail, paused, judged = row[7:11]
        pause = None if reason is None else RunPause(reason, detail, float(paused))
        judged = None if judged is None else float(judged)
        return cls(name, poll, created, total, bool(done), stopped, pause, judged)


class Held(list[Record]):
    """What :meth:`~campaignkit.ledger.Ledger.plan` returns: the records of
    the recipients its chunk will not send, and ``run``, the run as the
    plan's transaction left it (None for a run the ledger does not hold)."""

    __slots__ = ("run",)

    def __init__(self, records: Iterable[Record] = (), run: RunInfo | None = None) -> None:
        super().__init__(records)
        self.run = run


STALL_AFTER: Final = 300.0
"""Seconds a run's planned recipients may wait, nothing of the run moving,
before it is shown stalled (a broker that lost its data, no worker running)."""


@attrs.frozen
class Stall:
    """A run whose ``planned`` recipients no worker has claimed, nothing of
    it moving since ``since`` (UNIX seconds) for longer than ``stall_after``."""

    since: float
    planned: int

    @staticmethod
    def command(info: RunInfo, journal: str) -> str:
        """The command that hands the run's planned chunks over again: a
        ``submit`` of the same input under the same run files each planned
        recipient into a new chunk and enqueues it (a recipient the run holds
        in any other state is left alone: nobody twice). The ledger keeps
        neither the input nor the broker: ``FILE`` and ``BROKER`` are those
        of the run's first ``submit``."""
        values = (info.poll, journal, info.run)
        poll, journal, run = map(shlex.quote, values)
        return f"campaignkit submit {poll} FILE --broker BROKER --journal {journal} --run {run}"


@attrs.frozen
class Skipped:
    """An input not sent: ``kind`` is ``invalid`` or ``duplicate``."""

    position: int
    kind: str
    phone: str | None = None
    reason: str | None = None
    line: int | None = None
    item: str | None = attrs.field(default=None, repr=False)
    """The input as JSON, where it could be written so."""


def spans(positions: Sequence[int]) -> str:
    """Sorted ``positions`` as a claim's row keeps them: runs of consecutive
    ones as ``first-last``, the others alone, space-separated (a chunk of
    an input read in order is one span)."""
    parts: list[str] = []
    # Consecutive positions share their distance from their index.
    for _, group in groupby(enumerate(positions), lambda pair: pair[1] - pair[0]):
        first, *rest = (position for _, position in group)
        parts.append(f"{first}-{rest[-1]}" if rest else str(first))
    return " ".join(parts)


def positions_of(text: str) -> list[int]:
    """The positions of :func:`spans`' text (or of positions space-separated)."""
    positions: list[int] = []
    for part in text.split():
        first, _, last = part.partition("-")
        positions += range(int(first), int(last or first) + 1)
    return positions
