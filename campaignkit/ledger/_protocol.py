"""What every ledger does: :class:`Ledger`, the base of the durable stores
(SQLite, PostgreSQL) and of :class:`MemoryLedger`. One conformance suite
(``tests/ledger``) holds them all to the same rules."""

from __future__ import annotations

import abc
import time
import warnings
from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Self

import orjson

from .._funnel import Funnel, OutcomeGroup, build_funnel
from .._report import BulkReport, DuplicateUser, InvalidUser, SuppressedUser
from ..errors import LedgerError
from ..models import User
from ..status import DeploymentStatus
from ._build import Request, build_report, requests_of, suppressed_of, user_of
from ._errors import error_from_detail
from ._outcomes import RecipientOutcome, StatusRow, failure_statuses
from ._records import (
    ACCEPTED,
    PLANNED,
    STALL_AFTER,
    STATES,
    Claim,
    Recipient,
    Record,
    RunInfo,
    Skipped,
    Stall,
)
from ._sending import SendingRules
from ._suppression import SuppressionList

if TYPE_CHECKING:
    from ..webhooks import WebhookEvent

EXPIRED = "claim expired: its sender stopped (or hung) mid-request; it may have been sent"

DEFAULT_CLAIM_TTL = 600.0
"""Seconds a claim holds its recipients before it is reported ambiguous."""


class Ledger(SendingRules, SuppressionList):
    """A delivery ledger: one record per recipient of a run (see
    :mod:`campaignkit.ledger`), and the suppression list its runs honour.
    Open it (``async with`` or :meth:`open`), close it with :meth:`aclose`."""

    claim_ttl: float
    """Seconds a claim holds its recipients before they are reported ambiguous."""

    is_new: bool
    """Whether opening this ledger created it (a new SQLite file, or new tables
    in a PostgreSQL schema)."""

    def __init__(self, *, claim_ttl: float) -> None:
        if isinstance(claim_ttl, bool) or not isinstance(claim_ttl, int | float) or claim_ttl <= 0:
            raise LedgerError(f"claim_ttl must be a number of seconds > 0, got {claim_ttl!r}")
        self.claim_ttl = float(claim_ttl)
        self.is_new = False
        self._identity: str | None = None

    @property
    def identity(self) -> str:
        """Which ledger this is: a random id written into it when it was created
        (chunk messages carry it, so that a worker on another ledger leaves
        them). Known once the ledger is open."""
        if self._identity is None:
            raise LedgerError(f"{self!r} is not open: its identity is read when it opens")
        return self._identity

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect (and create the schema on first use); idempotent."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release the connection(s); idempotent."""

    async def close(self) -> None:
        """Deprecated: use :meth:`aclose`."""
        warnings.warn(
            "Ledger.close() is deprecated: use aclose()", DeprecationWarning, stacklevel=2
        )
        await self.aclose()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- the rules of a run

    @abc.abstractmethod
    async def start_run(self, run: str, poll: str, *, input_pass: str | None = None) -> RunInfo:
        """The run, created for ``poll`` if new; a run of another poll is refused."""

    @abc.abstractmethod
    async def stop_run(self, run: str, detail: str) -> None:
        """Record that a fatal answer ended the run (``detail``: the error, as a
        rejected recipient's): its :class:`RunInfo` says so (``stopped``), its
        senders file every chunk they claim after it rejected with it, unsent,
        and its report's ``fatal`` is that error. The first one recorded
        stays, until a new pass over the input (``start_run`` with an
        ``input_pass``) clears it."""

    @abc.abstractmethod
    async def plan(
        self,
        run: str,
        chunk: str,
        recipients: Sequence[Recipient],
        *,
        retry_rejected: bool = False,
        ignore_suppression: bool = False,
        deferred: Mapping[str, str] | None = None,
    ) -> list[Record]:
        """File ``recipients`` as planned in ``chunk`` (those on the suppression
        list as suppressed, unless ``ignore_suppression``; the others whose
        phone ``deferred`` maps to a detail as deferred with it: the send's
        rules cannot send them now); the records of those it will not send."""

    @abc.abstractmethod
    async def claim(self, run: str, chunk: str, *, owner: str = "") -> Claim | None:
        """Atomically take the planned recipients of ``chunk`` (None if none are
        left); those whose numbers were listed since they were planned are
        filed suppressed instead."""

    @abc.abstractmethod
    async def settle(
        self,
        run: str,
        claim: str,
        state: str,
        *,
        launch_request_id: str | None = None,
        ack: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Record what became of a claim's request: accepted, rejected or ambiguous."""

    @abc.abstractmethod
    async def release(self, run: str, claim: str) -> None:
        """Put the recipients of a claim whose request surely never left (its
        sender was stopped while waiting to retry a 429) back to planned in
        their chunk, for the run's next sender to take. A claim settled
        already keeps its outcome; one reported ambiguous because it expired
        is released, as its sender knows better."""

    @abc.abstractmethod
    async def expire(self, run: str, *, now: float | None = None) -> int:
        """Report the recipients of expired claims ambiguous; how many there were."""

    @abc.abstractmethod
    async def finish_input(self, run: str, total: int) -> None:
        """Record that the run's whole input (``total`` items) has been planned."""

    @abc.abstractmethod
    async def mark_enqueued(self, run: str, chunk: str) -> None: ...

    @abc.abstractmethod
    async def unenqueued_chunks(self, run: str) -> list[str]:
        """Chunks with planned recipients whose message may never have been sent."""

    @abc.abstractmethod
    async def skip(self, run: str, items: Sequence[Skipped]) -> None:
        """Record inputs not sent (invalid or duplicate) by the run's current pass."""

    # -- reading

    @abc.abstractmethod
    async def run_info(self, run: str) -> RunInfo | None: ...

    @abc.abstractmethod
    async def runs(self) -> list[RunInfo]:
        """Every run, newest first."""

    @abc.abstractmethod
    async def counts(self, run: str) -> dict[str, int]:
        """Recipients per state (every state present, zeros included)."""

    @abc.abstractmethod
    def records(
        self, run: str, states: Sequence[str] = STATES, *, page_size: int = 10_000
    ) -> AsyncIterator[Record]:
        """The run's recipients in those states, in input order."""

    @abc.abstractmethod
    async def held(self, run: str, phones: Sequence[str]) -> dict[str, tuple[Record, float | None]]:
        """The records of ``phones`` in the run, each with when its claim was taken."""

    @abc.abstractmethod
    async def claims(self, run: str) -> list[tuple[str, str, str, str | None, str | None]]:
        """Every claim of the run: ``(claim, chunk, state, ack, detail)``, oldest first."""

    @abc.abstractmethod
    async def skipped(self, run: str) -> list[Skipped]:
        """The inputs the run's current pass did not send."""

    @abc.abstractmethod
    async def last_update(self, run: str) -> float | None:
        """When a recipient of the run last changed (UNIX seconds), if ever."""

    async def report(self, run: str) -> BulkReport:
        """The run's :class:`BulkReport`, as ``send_bulk`` gives it, read from the ledger.

        One chunk per request (claim); recipients still planned count as
        rejected (surely not sent), those still in flight as ambiguous.
        """
        info = await self.run_info(run)
        if info is None:
            raise LedgerError(f"this ledger has no run {run!r}")
        acks = {claim: ack for claim, _, _, ack, _ in await self.claims(run) if ack}
        requests, suppressed = await self.report_groups(run, acks)
        invalid, duplicates = [], []
        for item in await self.skipped(run):
            if item.kind == "duplicate":
                user = user_of(item.item or "{}")
                duplicates.append(DuplicateUser(item.position, item.phone or "", user))
            else:
                value = None if item.item is None else orjson.loads(item.item)
                reason = item.reason or "invalid"
                invalid.append(InvalidUser(item.position, reason, item.line, value))
        last = await self.last_update(run)
        report = build_report(
            info.poll,
            requests,
            invalid=invalid,
            duplicates=duplicates,
            suppressed=suppressed,
            total=info.total,
            elapsed=max(0.0, (last or info.created) - info.created),
        )
        report.funnel = await self.funnel(run)
        if info.stopped is not None:
            report.fatal = error_from_detail(info.stopped)
        return report

    async def report_groups(
        self, run: str, acks: Mapping[str, str]
    ) -> tuple[list[Request], list[SuppressedUser]]:
        """What :meth:`report` is built of: the run's recipients grouped by
        claim and state (see :func:`requests_of`), and its suppressed ones.
        A ledger that keeps them grouped answers without a record each."""
        records = [record async for record in self.records(run)]
        return requests_of(records, acks), suppressed_of(records)

    # -- outcomes: what became of each accepted recipient

    @abc.abstractmethod
    async def record_statuses(
        self, run: str, rows: Sequence[StatusRow], *, final: Sequence[str] = ()
    ) -> None:
        """Record the deployment statuses tracking saw, and (in the same
        transaction) the launches whose every deployment is ``final``."""

    @abc.abstractmethod
    async def record_event(self, event: WebhookEvent) -> None:
        """Record a delivered, read, response or opt-out webhook event on its
        recipient: the phone's in the most recent run holding it as accepted
        (other events, and phones of no accepted recipient, are not recorded).
        This makes every ledger a webhook handler's ``ledger=``."""

    @abc.abstractmethod
    async def launch_phones(self, run: str, launches: Collection[str]) -> dict[str, list[str]]:
        """The phones of the run's accepted recipients, by launch, for those ``launches``."""

    @abc.abstractmethod
    async def outcomes(self, run: str) -> list[RecipientOutcome]:
        """The outcomes known of the run's recipients, by phone."""

    @abc.abstractmethod
    async def outcome_groups(self, run: str) -> list[OutcomeGroup]:
        """The run's outcomes counted by status and known webhook facts."""

    @abc.abstractmethod
    async def final_launches(self, run: str) -> set[str]:
        """The launches of the run followed until every deployment was final:
        not tracked again."""

    async def funnel(self, run: str) -> Funnel:
        """The run's :class:`~campaignkit.Funnel`: planned → accepted →
        delivered → read → replied, failures by status, and the rest."""
        return build_funnel(await self.counts(run), await self.outcome_groups(run))

    async def stall(
        self, run: str, *, stall_after: float = STALL_AFTER, now: float | None = None
    ) -> Stall | None:
        """The run's :class:`Stall`, if it has stalled: recipients still
        planned, no fatal answer, and nothing of it (a plan, a claim, a
        settle) moved for ``stall_after`` seconds before ``now``."""
        info = await self.run_info(run)
        planned = (await self.counts(run))[PLANNED]
        moved = await self.last_update(run)
        if info is None or info.stopped is not None or not planned or moved is None:
            return None
        if (time.time() if now is None else now) - moved < stall_after:
            return None
        return Stall(moved, planned)

    async def follow_up_records(
        self, run: str, statuses: Iterable[DeploymentStatus | str]
    ) -> AsyncIterator[Record]:
        """The records of ``run``'s recipients whose deployment ended in one of
        ``statuses`` (failure statuses, e.g. ``FAILURE_BY_UNABLE_TO_CONTACT``),
        in input order, and no one else's. Needs the run's outcomes
        (``follow``) and a ledger that keeps accepted users (SQLite,
        PostgreSQL): the memory ledger raises :class:`LedgerError`."""
        chosen = failure_statuses(statuses)
        phones = {o.phone for o in await self.outcomes(run) if o.status in chosen}
        if not phones:
            return
        async for record in self.records(run, [ACCEPTED]):
            if record.phone in phones:
                if record.user is None:
                    raise LedgerError(
                        f"{self!r} keeps no users of accepted recipients: a follow-up "
                        "run needs a durable journal (an SQLite file or PostgreSQL)"
                    )
                yield record

    async def follow_up_users(
        self, run: str, statuses: Iterable[DeploymentStatus | str]
    ) -> AsyncIterator[User]:
        """The users of :meth:`follow_up_records`: the input of a follow-up
        run (``send_bulk`` them under another ``run=``)."""
        async for record in self.follow_up_records(run, statuses):
            yield user_of(record.user or "{}")

    # -- webhook deliveries

    @abc.abstractmethod
    async def first_sighting(self, namespace: str, key: str) -> bool:
        """Remember ``key``; True the first time it is seen in ``namespace``."""

    @abc.abstractmethod
    async def prune_seen(self, namespace: str, before: float) -> int:
        """Forget the keys of ``namespace`` first seen before ``before`` (UNIX seconds)."""

    @abc.abstractmethod
    async def forget(self, namespace: str, key: str) -> None:
        """Forget ``key`` (its handling failed: a redelivery should be handled)."""
