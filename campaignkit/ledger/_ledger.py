"""What every ledger does: :class:`Ledger`, every rule of the delivery
ledger written once over a :class:`~._store.Store` (SQLite, PostgreSQL or
memory). One conformance suite (``tests/ledger``) holds the stores to them."""

from __future__ import annotations

import abc
import time
import uuid
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, Self

import attrs
import orjson

from .._funnel import Funnel, OutcomeGroup, build_funnel
from .._guards import template_pauses
from .._input.validation import raise_problems
from .._redaction import sdk_logger
from .._report import BulkReport
from ..errors import LedgerError
from ..models import User
from ..status import DeploymentStatus
from ._build import read_report, user_of
from ._guarding import (
    CANARY,
    FAILED,
    MANUAL_PAUSE,
    TEMPLATE,
    defer_contacted,
    defer_over_budget,
    judge_breaker,
    pause_problems,
    pause_running,
    template_detail,
)
from ._identity import new_identity
from ._outcomes import RecipientOutcome, StatusRow, fact_of, failure_statuses
from ._records import (
    ACCEPTED,
    AMBIGUOUS,
    DEFERRED,
    IN_FLIGHT,
    PLANNED,
    REJECTED,
    STALL_AFTER,
    STATES,
    SUPPRESSED,
    Claim,
    Held,
    Recipient,
    Recipients,
    Record,
    RunInfo,
    Skipped,
    Stall,
)
from ._schema import retried
from ._sending import spread
from ._store import ClaimRow, Store, StoreTx, Where
from ._suppression import (
    MANUAL,
    OPT_OUT,
    Suppression,
    entry_problems,
    listed_by_outcome,
    suppression_phones,
)

if TYPE_CHECKING:
    from ..webhooks import WebhookEvent

log = sdk_logger("campaignkit.ledger")

EXPIRED: Final = "claim expired: its sender stopped (or hung) mid-request; it may have been sent"

DEFAULT_CLAIM_TTL: Final = 600.0
"""Seconds a claim holds its recipients before it is reported ambiguous."""

_OPEN: Final = (IN_FLIGHT, AMBIGUOUS)
"""The states of a claim (and of its recipients) that a settle or a release ends."""
_COUNTED: Final = (IN_FLIGHT, ACCEPTED, AMBIGUOUS)
"""The states of recipients that count against the daily limit: taken into a
request, and not surely refused."""


async def _give_back(tx: StoreTx, run: str, claim: str, now: float) -> None:
    """Put what ``claim`` holds open (if anything) back to planned in its chunk."""
    if await tx.update_claims(run, PLANNED, _OPEN, claim=claim):
        where = Where(_OPEN, claims=[claim])
        await tx.move(run, where, PLANNED, now, {"claim": None, "detail": None})


def _options_of(text: str | None) -> dict[str, Any]:
    """A run's options, from their JSON text (``{}`` if none were saved)."""
    options: dict[str, Any] = {} if text is None else orjson.loads(text)
    return options


def _filed(entry: Suppression | None, deferral: str | None) -> tuple[str, str | None]:
    """A plan's state and detail of a recipient: suppressed (why), deferred (why) or planned."""
    if entry is not None:
        return SUPPRESSED, entry.reason
    return (PLANNED, None) if deferral is None else (DEFERRED, deferral)


class Ledger(abc.ABC):
    """A delivery ledger: one record per recipient of a run (see
    :mod:`campaignkit.ledger`), and the suppression list its runs honour.
    Open it (``async with`` or :meth:`open`), close it with :meth:`aclose`.

    Made over a store (``Ledger(store)``): :class:`SqliteLedger`,
    :class:`PostgresLedger` and :class:`MemoryLedger` each give theirs. An
    ABC with no abstract method, so that a wrapper may be ``register``-ed.
    """

    claim_ttl: float
    """Seconds a claim holds its recipients before they are reported ambiguous."""

    is_new: bool
    """Whether opening this ledger created it (a new SQLite file, or new tables
    in a PostgreSQL schema)."""

    store: Store
    """What the ledger keeps its records in: the backend."""

    reconnect_timeout: float = 60.0
    """Seconds an operation keeps reconnecting (jittered backoff up to 5 s, one
    warning of the ``campaignkit.ledger`` logger per attempt) after the
    connection to a ledger server is lost, before it raises."""

    def __init__(self, store: Store, *, claim_ttl: float = DEFAULT_CLAIM_TTL) -> None:
        if isinstance(claim_ttl, bool) or not isinstance(claim_ttl, int | float) or claim_ttl <= 0:
            raise LedgerError(f"claim_ttl must be a number of seconds > 0, got {claim_ttl!r}")
        self.claim_ttl = float(claim_ttl)
        self.is_new = False
        self.store = store
        self._identity: str | None = None

    @property
    def identity(self) -> str:
        """Which ledger this is: a random id written into it when it was created
        (chunk messages carry it, so that a worker on another ledger leaves
        them). Known once the ledger is open."""
        if self._identity is None:
            raise LedgerError(f"{self!r} is not open: its identity is read when it opens")
        return self._identity

    @retried
    async def open(self) -> None:
        """Connect (and create the schema on first use; a store made with
        ``create=False`` refuses a missing ledger with
        :class:`~campaignkit.ledger.LedgerNotFound`); read the ledger's
        identity. Idempotent."""
        created = await self.store.open()
        async with self.store.transaction() as tx:
            identity = await tx.identity()
            if identity is None:  # a new ledger, or one of a release before identities
                identity = new_identity()
                await tx.set_identity(identity, time.time())
        self._identity = identity
        self.is_new = self.is_new or created

    async def aclose(self) -> None:
        """Release the connection(s); idempotent."""
        await self.store.aclose()

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

    @retried
    async def start_run(self, run: str, poll: str, *, input_pass: str | None = None) -> RunInfo:
        """The run, created for ``poll`` if new; a run of another poll is refused.

        ``input_pass`` names a new reading of the run's input (a producer, a
        ``send_bulk`` call): the run is not done until it finishes, the
        report counts the inputs it skips, not those of earlier passes (whose
        positions may name other inputs), and a fatal answer recorded by an
        earlier pass is cleared.
        """
        async with self.store.transaction() as tx:
            await tx.add_run(run, poll, time.time())
            found = await tx.run(run)
            assert found is not None
            info = found[0]
            if input_pass is not None and info.poll == poll:
                fields = {"input_pass": input_pass, "input_done": False, "total": None}
                await tx.update_run(run, fields)
                await tx.clear_stop(run)
                info = attrs.evolve(info, total=None, input_done=False, stopped=None)
        if info.poll != poll:
            raise LedgerError(
                f"run {run!r} of this ledger sends poll {info.poll}, not poll {poll}: "
                "name another run (run=...)"
            )
        return info

    @retried
    async def stop_run(self, run: str, detail: str) -> None:
        """Record that a fatal answer ended the run (``detail``: the error, as a
        rejected recipient's): its :class:`RunInfo` says so (``stopped``), its
        senders file every chunk they claim after it rejected with it, unsent,
        and its report's ``fatal`` is that error. The first one recorded
        stays, until a new pass over the input (``start_run`` with an
        ``input_pass``) clears it."""
        async with self.store.transaction() as tx:
            await tx.stop_run(run, detail, time.time())

    @retried
    async def plan(
        self,
        run: str,
        chunk: str,
        recipients: Sequence[Recipient],
        *,
        retry_rejected: bool = False,
        ignore_suppression: bool = False,
        deferred: Mapping[str, str] | None = None,
    ) -> Held:
        """File ``recipients`` as planned in ``chunk``.

        A recipient new to the run, or held as planned (by an earlier,
        interrupted producer), deferred or suppressed (by an earlier pass),
        joins ``chunk``; a rejected one too with ``retry_rejected``. One whose
        number is on the suppression list joins it as suppressed (the reason
        in its detail), unless ``ignore_suppression``; one whose phone
        ``deferred`` maps to a detail joins it as deferred with it (the send's
        rules cannot send it now). Every other recipient keeps its record.
        Returned: the records of those this chunk will not send (held in
        another chunk, suppressed or deferred), and the run as the plan left it.
        """
        now = time.time()
        # As columns: send_bulk's chunks come so, with no Recipient made a person.
        columns = Recipients.of(recipients)
        replace = (PLANNED, DEFERRED, SUPPRESSED) + ((REJECTED,) if retry_rejected else ())
        deferring = deferred or {}

        async def filing(tx: StoreTx) -> list[Record]:
            await tx.add_chunk(run, chunk, len(columns), now)
            listed = {} if ignore_suppression else await tx.suppressions_of(columns.phones)
            if not listed and not deferring:
                return await tx.upsert(run, chunk, columns, PLANNED, None, replace, now)
            filings: dict[tuple[str, str | None], list[int]] = {}
            for i, phone in enumerate(columns.phones):
                filed = _filed(listed.get(phone), deferring.get(phone))
                filings.setdefault(filed, []).append(i)
            held: list[Record] = []
            for (state, detail), chosen in filings.items():
                group = Recipients(
                    [columns.phones[i] for i in chosen],
                    [columns.positions[i] for i in chosen],
                    [columns.users[i] for i in chosen],
                )
                kept = await tx.upsert(run, chunk, group, state, detail, replace, now)
                held += kept
                if state != PLANNED:
                    elsewhere = {record.phone for record in kept}
                    held += (
                        Record(r.phone, r.position, state, None, detail, r.user)
                        for r in group
                        if r.phone not in elsewhere
                    )
            return held

        async def planning(tx: StoreTx) -> Held:
            held = await filing(tx)
            found = await tx.run(run)  # for its producer: no transaction of its own
            return Held(held, None if found is None else found[0])

        # Not durable: one lost in a crash of the machine is planned again by the next send.
        async with self.store.transaction(durable=False) as tx:
            return await tx.at_once(planning)

    async def claim(self, run: str, chunk: str, *, owner: str = "") -> Claim | None:
        """Atomically take the planned recipients of ``chunk`` (None if none are
        left), in input order; those whose numbers were listed since they
        were planned are filed suppressed instead, and those past the run's
        daily limit deferred.

        Committed before it returns: only then may a request carry them.
        """
        return await self._claim(run, chunk, owner, uuid.uuid4().hex)

    @retried
    async def _claim(self, run: str, chunk: str, owner: str, token: str) -> Claim | None:
        # Run again after a connection lost during COMMIT, the claim takes
        # back what it may already hold: never stranded in flight unsent.
        now = time.time()

        async def taking(tx: StoreTx) -> Claim | None:
            # Cheap, and nothing leaves before it: a ledger replaced under a
            # running send would let it message everyone its runs already reached.
            identity, info, saved = await tx.run_context(run)
            self._check_identity(identity)
            # What this claim took before a COMMIT whose answer was lost goes
            # back to planned: the claim is made again from the start.
            await _give_back(tx, run, token, now)
            if info is not None and info.paused is not None:
                return None  # the chunk stays planned, for after its resumption
            if not await tx.hold_chunk(run, chunk, token):
                return None  # another claim has it
            await self._suppress_late(tx, run, chunk, now)
            options = _options_of(saved)
            await defer_contacted(tx, run, chunk, now, options, _COUNTED)
            await defer_over_budget(tx, run, chunk, now, options, _COUNTED)
            taken = await tx.take(run, chunk, (PLANNED,), IN_FLIGHT, token, now)
            if not taken:
                return None
            expires = now + self.claim_ttl
            await tx.add_claim(run, token, chunk, owner, taken.positions, now, expires)
            return Claim(token, chunk, taken, expires, run=info, options=options)

        async with self.store.transaction() as tx:
            return await tx.at_once(taking)

    def _check_identity(self, found: str | None) -> None:
        """Raise unless ``found`` (the identity the ledger holds now) is the
        one opened: a file copied over it, or a schema dropped and made
        again, is another ledger."""
        if found != self.identity:
            now_holds = f"ledger {found}" if found else "no ledger identity"
            raise LedgerError(
                f"the ledger {self!r} was replaced while in use: opened as ledger "
                f"{self.identity}, it now holds {now_holds}. Stopped: nothing more is sent from it"
            )

    async def _suppress_late(self, tx: StoreTx, run: str, chunk: str, now: float) -> None:
        """File suppressed the planned recipients of ``chunk`` whose numbers
        were listed since they were planned."""
        late: dict[str, list[str]] = {}  # by reason
        for phone, entry in await tx.listed_in(run, chunk, PLANNED):
            late.setdefault(entry.reason, []).append(phone)
        for reason, phones in late.items():
            where = Where((PLANNED,), chunk=chunk, phones=phones)
            await tx.move(run, where, SUPPRESSED, now, {"detail": reason})

    @retried
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
        """Record what became of a claim's request: accepted, rejected or ambiguous.

        A claim already reported ambiguous because it expired takes the
        outcome its sender learnt after all.
        """
        if state not in (ACCEPTED, REJECTED, AMBIGUOUS):
            raise LedgerError(f"a claim settles as accepted, rejected or ambiguous, not {state!r}")

        async def settling(tx: StoreTx) -> None:
            fields = {"ack": ack, "detail": detail}
            if await tx.update_claims(run, state, _OPEN, claim=claim, fields=fields):
                where = Where(_OPEN, claims=[claim])
                fields = {"launch_request_id": launch_request_id, "detail": detail}
                await tx.move(run, where, state, time.time(), fields)
                if state == REJECTED:
                    await judge_breaker(tx, run, await self._options(tx, run))

        # Not durable: a settle lost in a crash of the machine leaves its claim in
        # flight, reported ambiguous once expired, never sent again.
        async with self.store.transaction(durable=False) as tx:
            await tx.at_once(settling)

    @retried
    async def release(self, run: str, claim: str) -> None:
        """Put the recipients of a claim whose request surely never left (its
        sender was stopped while waiting to retry a 429) back to planned in
        their chunk, for the run's next sender to take. A claim settled
        already keeps its outcome; one reported ambiguous because it expired
        is released, as its sender knows better."""
        async with self.store.transaction() as tx:
            await _give_back(tx, run, claim, time.time())

    @retried
    async def expire(self, run: str, *, now: float | None = None) -> int:
        """Report the recipients of expired claims ambiguous; how many there were."""
        now = time.time() if now is None else now
        async with self.store.transaction() as tx:
            fields = {"detail": EXPIRED}
            claims = await tx.update_claims(
                run, AMBIGUOUS, (IN_FLIGHT,), expired_before=now, fields=fields
            )
            if not claims:
                return 0
            return await tx.move(run, Where((IN_FLIGHT,), claims=claims), AMBIGUOUS, now, fields)

    @retried
    async def finish_input(self, run: str, total: int) -> None:
        """Record that the run's whole input (``total`` items) has been planned."""
        async with self.store.transaction() as tx:
            await tx.update_run(run, {"total": total, "input_done": True})

    @retried
    async def mark_enqueued(self, run: str, chunk: str) -> None:
        async with self.store.transaction() as tx:
            await tx.mark_enqueued(run, chunk)

    @retried
    async def unenqueued_chunks(self, run: str) -> list[str]:
        """Chunks with planned recipients whose message may never have been sent."""
        async with self.store.transaction() as tx:
            return await tx.unenqueued_chunks(run, PLANNED)

    @retried
    async def skip(self, run: str, items: Sequence[Skipped]) -> None:
        """Record inputs not sent (invalid or duplicate) by the run's current pass."""
        if not items:
            return
        async with self.store.transaction() as tx:
            found = await tx.run(run)
            if found is None:
                raise LedgerError(f"this ledger has no run {run!r}: start_run() first")
            await tx.add_skipped(run, found[1], items)

    # -- reading

    @retried
    async def run_info(self, run: str) -> RunInfo | None:
        async with self.store.transaction() as tx:
            found = await tx.at_once(lambda tx: tx.run(run))
        return None if found is None else found[0]

    @retried
    async def runs(self) -> list[RunInfo]:
        """Every run, newest first."""
        async with self.store.transaction() as tx:
            return await tx.runs()

    @retried
    async def counts(self, run: str) -> dict[str, int]:
        """Recipients per state (every state present, zeros included), and the
        inputs the run's current pass skipped (``invalid``, ``duplicate``)."""
        counts = dict.fromkeys((*STATES, "invalid", "duplicate"), 0)
        async with self.store.transaction() as tx:
            counts.update(await tx.counts(run))
            found = await tx.run(run)
            if found is not None:
                counts.update(await tx.skipped_counts(run, found[1]))
        return counts

    async def records(
        self, run: str, states: Sequence[str] = STATES, *, page_size: int = 10_000
    ) -> AsyncIterator[Record]:
        """The run's recipients in those states, in input order."""
        async for record in self.store.records(run, list(states), page_size):
            yield record

    @retried
    async def held(self, run: str, phones: Sequence[str]) -> dict[str, tuple[Record, float | None]]:
        """The records of ``phones`` in the run, each with when its claim was taken."""
        async with self.store.transaction() as tx:
            return await tx.held(run, phones)

    @retried
    async def claims(self, run: str) -> list[ClaimRow]:
        """Every claim of the run: ``(claim, chunk, state, ack, detail)``, oldest first."""
        async with self.store.transaction() as tx:
            return await tx.claims(run)

    @retried
    async def skipped(self, run: str) -> list[Skipped]:
        """The inputs the run's current pass did not send."""
        async with self.store.transaction() as tx:
            found = await tx.run(run)
            return [] if found is None else await tx.skipped(run, found[1])

    @retried
    async def last_update(self, run: str) -> float | None:
        """When a recipient of the run last changed (UNIX seconds), if ever."""
        async with self.store.transaction() as tx:
            return await tx.last_update(run)

    async def report(self, run: str) -> BulkReport:
        """The run's :class:`BulkReport`, as ``send_bulk`` gives it, read from the ledger.

        One chunk per request (claim); recipients still planned count as
        rejected (surely not sent), those still in flight as ambiguous (the
        planned ones of a paused run deferred).
        """
        return await read_report(self, run)

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
        # A paused run waits for a person's resume: not stalled.
        if info is None or info.stopped or info.paused or not planned or moved is None:
            return None
        if (time.time() if now is None else now) - moved < stall_after:
            return None
        return Stall(moved, planned)

    # -- outcomes: what became of each accepted recipient

    @retried
    async def record_statuses(
        self, run: str, rows: Sequence[StatusRow], *, final: Sequence[str] = ()
    ) -> None:
        """Record the deployment statuses tracking saw (a status held already
        keeps its time), and (in the same transaction) the launches whose
        every deployment is ``final``. A status that forbids sending
        (:data:`~campaignkit.ledger.SUPPRESSING_STATUSES`) lists the number."""
        now = time.time()
        async with self.store.transaction() as tx:
            if rows:
                await tx.upsert_statuses(run, rows)
            # In the same transaction: an outcome is never kept without its listing.
            for reason, phones in listed_by_outcome(rows).items():
                await tx.add_suppressions(phones, reason, run, now)
            if final:
                await tx.add_final(run, final, now)
            if any(row.status in FAILED for row in rows):
                await judge_breaker(tx, run, await self._options(tx, run))

    @retried
    async def record_event(self, event: WebhookEvent) -> None:
        """Record a delivered, read, response or opt-out webhook event on its
        recipient: the phone's in the most recent run holding it as accepted
        (other events, and phones of no accepted recipient, are not recorded;
        an opt-out lists the number all the same); a template paused or
        disabled pauses every running run. This makes every ledger a webhook
        handler's ``ledger=``."""
        if event.template is not None and template_pauses(event.template.status):
            return await self._pause_every_run(template_detail(event))
        if (found := fact_of(event)) is None:
            return
        async with self.store.transaction() as tx:
            run = await tx.run_of_accepted(found.phone, ACCEPTED)
            if found.fact == "opted_out_at":  # listed even when no run of ours sent it
                await tx.add_suppressions([found.phone], OPT_OUT, run, time.time())
            if run is None:
                log.info("webhook: a %s event of no accepted recipient: not recorded", found.fact)
                return
            await tx.set_fact(
                run, found.phone, found.fact, found.at, found.conversation_id, found.answer
            )

    @retried
    async def launch_phones(self, run: str, launches: Collection[str]) -> dict[str, list[str]]:
        """The phones of the run's accepted recipients, by launch, for those ``launches``."""
        phones: dict[str, list[str]] = {launch: [] for launch in launches}
        if phones:
            async with self.store.transaction() as tx:
                phones.update(await tx.launch_phones(run, ACCEPTED, phones.keys()))
        return phones

    @retried
    async def outcomes(self, run: str) -> list[RecipientOutcome]:
        """The outcomes known of the run's recipients, by phone."""
        async with self.store.transaction() as tx:
            return await tx.outcomes(run)

    @retried
    async def outcome_groups(self, run: str) -> list[OutcomeGroup]:
        """The run's outcomes counted by status and known webhook facts."""
        async with self.store.transaction() as tx:
            return await tx.outcome_groups(run)

    @retried
    async def final_launches(self, run: str) -> set[str]:
        """The launches of the run followed until every deployment was final:
        not tracked again."""
        async with self.store.transaction() as tx:
            return await tx.final_launches(run)

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

    # -- protecting the sending line

    @retried
    async def save_run_options(self, run: str, options: Mapping[str, Any]) -> None:
        """Keep ``options`` (plain JSON data) as the run's, replacing earlier ones.

        Its ``daily_limit`` (an int, or None) caps the unique recipients
        claimed over every run of the ledger in any 24 h: a claim of the run
        files the rest of its chunk as deferred.
        """
        text = orjson.dumps(dict(options)).decode()
        async with self.store.transaction() as tx:
            await tx.save_options(run, text, time.time())

    @retried
    async def run_options(self, run: str) -> dict[str, Any]:
        """The options last saved for the run (``{}`` if none)."""
        async with self.store.transaction() as tx:
            return await self._options(tx, run)

    @staticmethod
    async def _options(tx: StoreTx, run: str) -> dict[str, Any]:
        return _options_of(await tx.options(run))

    @retried
    async def assign_lines(self, phones: Sequence[str], lines: Sequence[str]) -> dict[str, str]:
        """The sending line of each of ``phones``, one of ``lines``: the line
        the ledger remembers for it if that is one of ``lines``, otherwise the
        line with the fewest people (the first such in ``lines``), remembered
        from then on. Atomic: concurrent callers never unbalance the lines."""
        if not phones or not lines:
            return {}
        async with self.store.transaction() as tx:
            await tx.lock("lines")
            kept: dict[str, str] = {}
            moved: Counter[str] = Counter()  # people leaving a line not among ``lines``
            for phone, line in (await tx.lines_of(phones)).items():
                if line in lines:
                    kept[phone] = line
                else:
                    moved[line] += 1
            new = [phone for phone in phones if phone not in kept]
            if not new:
                return kept
            assigned = spread(new, await tx.line_load(lines), lines)
            await tx.set_lines(assigned, time.time())
            moved.subtract(Counter(assigned.values()))
            await tx.add_line_load({line: -change for line, change in moved.items() if change})
        return kept | assigned

    # -- the suppression list
    #
    # Numbers are given as text with their country code ("+57 300 123 4567")
    # or as users (a User or its dict), and kept as the ledger keys recipients
    # ("+573001234567"). A bad one raises ValidationError, naming it, before
    # anything is changed.

    @retried
    async def suppress(
        self, phones: Iterable[Any], reason: str = MANUAL, *, source: str | None = None
    ) -> int:
        """Put ``phones`` on the list with ``reason`` (and ``source``, what put
        them there); how many were new to it. A number already on the list
        keeps its entry (remove it first to change its reason)."""
        raise_problems(entry_problems(reason, source))
        found = suppression_phones(phones)
        async with self.store.transaction() as tx:
            return await tx.add_suppressions(found, reason, source, time.time())

    @retried
    async def unsuppress(self, phones: Iterable[Any]) -> int:
        """Take ``phones`` off the list; how many were on it."""
        found = suppression_phones(phones)
        async with self.store.transaction() as tx:
            return await tx.remove_suppressions(found)

    @retried
    async def suppressed(self, phones: Iterable[Any]) -> dict[str, Suppression]:
        """The entries of those of ``phones`` that are on the list, by phone."""
        found = suppression_phones(phones)
        async with self.store.transaction() as tx:
            return await tx.suppressions_of(found)

    async def suppression(self, phone: Any) -> Suppression | None:
        """The entry of ``phone`` if it is on the list, else None."""
        return next(iter((await self.suppressed([phone])).values()), None)

    async def suppressions(self, *, page_size: int = 10_000) -> AsyncIterator[Suppression]:
        """Every number on the list, in phone order (read page by page)."""
        async for entry in self.store.suppressions(page_size):
            yield entry

    # -- webhook deliveries

    @retried
    async def first_sighting(self, namespace: str, key: str) -> bool:
        """Remember ``key``; True the first time it is seen in ``namespace``."""
        async with self.store.transaction() as tx:
            return await tx.add_seen(namespace, key, time.time())

    @retried
    async def prune_seen(self, namespace: str, before: float) -> int:
        """Forget the keys of ``namespace`` first seen before ``before`` (UNIX seconds)."""
        async with self.store.transaction() as tx:
            return await tx.prune_seen(namespace, before)

    @retried
    async def forget(self, namespace: str, key: str) -> None:
        """Forget ``key`` (its handling failed: a redelivery should be handled)."""
        async with self.store.transaction() as tx:
            await tx.forget_seen(namespace, key)

    # -- dry runs

    @asynccontextmanager
    async def rehearsal(self) -> AsyncIterator[Ledger]:
        """A ledger over this one's contents whose every change is undone at
        the block's end (a dry run); a durable one's write lock is held meanwhile."""
        async with self.store.rehearsal() as store:
            dry = Ledger(store, claim_ttl=self.claim_ttl)
            dry._identity = self.identity
            yield dry

    # -- paused runs

    async def pause_run(self, run: str, reason: str = MANUAL_PAUSE, detail: str = "") -> bool:
        """Pause the run: no claim (of any worker) takes anything more of it
        until :meth:`resume_run`. ``reason``: who paused it (``breaker``,
        ``canary``, ``template``, ``manual``); ``detail``: its figures.
        Whether it was paused now (a paused run keeps its first pause)."""
        raise_problems(pause_problems(reason, detail))
        return await self._pause(run, reason, detail or "paused by hand")

    async def judge_canary(self, run: str, detail: str) -> bool:
        """Pause the run while its canary is judged (reason ``canary``,
        ``detail``) and record, in the same transaction, that it was taken to
        judgement (:attr:`RunInfo.canary_judged`): a send stopped before the
        verdict leaves the pause for the next one to judge, never an ungated
        run. Whether it was paused now (if not, nothing is recorded)."""
        return await self._pause(run, CANARY, detail, canary=True)

    @retried
    async def _pause(self, run: str, reason: str, detail: str, *, canary: bool = False) -> bool:
        async with self.store.transaction() as tx:
            if await tx.run(run) is None:
                raise LedgerError(f"this ledger has no run {run!r}")
            now = time.time()
            paused = await tx.pause_run(run, reason, detail, now)
            if paused and canary:
                await tx.judge_canary(run, now)
        if paused:
            log.warning("run %s: paused (%s): %s", run, reason, detail)
        return paused

    @retried
    async def resume_run(self, run: str) -> int:
        """Resume a paused run; how many recipients it holds planned. A chunk
        whose task found it paused was left planned (acknowledged, not sent):
        the run's next send (``send_bulk`` of the same input and run, or a
        ``submit``: :meth:`Stall.command`) hands it over, nobody twice."""
        async with self.store.transaction() as tx:
            if await tx.run(run) is None:
                raise LedgerError(f"this ledger has no run {run!r}")
            resumed = await tx.resume_run(run)
            planned = (await tx.counts(run)).get(PLANNED, 0)
        if resumed:
            # Asked for by its caller, who says it (a pause is news, a resume is not).
            log.info("run %s: resumed (%d recipients planned)", run, planned)
        return planned

    @retried
    async def _pause_every_run(self, detail: str) -> None:  # a template paused or disabled
        async with self.store.transaction() as tx:
            await pause_running(tx, TEMPLATE, detail, (PLANNED, IN_FLIGHT))
