"""``send_bulk``'s pipeline in one process: the :class:`Producer` and
``concurrency`` :class:`ChunkSender` tasks over an asyncio queue, and the
report read from the ledger."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterable, Iterable, Sequence
from typing import Any, Final

import attrs
import orjson

from .._input.users import as_user
from .._report import BulkChunk, BulkReport
from ..errors import CampaignKitError, LedgerError
from ..ledger import (
    ACCEPTED,
    AMBIGUOUS,
    IN_FLIGHT,
    PLANNED,
    SUPPRESSED,
    Claim,
    Ledger,
    Record,
)
from ..models import User
from ._options import BulkOptions
from ._pacing import OUTCOME_STATE, ProgressReporter, RateLimiter, logger
from ._pipeline import ChunkSender, Handed, Producer
from ._planner import PlannedChunk, SeenPhones
from ._seam import BulkClient
from ._sender import is_fatal
from ._stopping import until_done
from ._watch import Watch

TWIN_PATIENCE: Final = 30.0
"""Seconds a send waits at its end for the requests another sender of its run
(a twin) took during it and still has under way, to report their outcome."""


class BulkSend:
    """One ``send_bulk`` call: its producer, its senders and its progress."""

    def __init__(
        self,
        client: BulkClient,
        ledger: Ledger,
        run: str,
        options: BulkOptions,
        *,
        seen: SeenPhones | None = None,
    ) -> None:
        self.ledger, self.run_name, self.options = ledger, run, options
        self.concurrency, self.interrupt_grace = options.concurrency, options.interrupt_grace
        self.input_pass = uuid.uuid4().hex
        self.producer = Producer(
            ledger,
            run,
            options,
            input_pass=self.input_pass,
            seen=seen,
            on_held=self._count_held,
            on_read=self._count_read,
        )
        self.sender = ChunkSender(
            client,
            ledger,
            owner=self.input_pass,
            timeout=options.timeout,
            max_retries=options.max_retries,
        )
        self.progress = ProgressReporter(options.on_progress, self.producer.planner)
        self.watch = Watch.of(client, ledger, run, options, self.producer.planner)
        """Following while sending, and the canary's gate."""
        transport = client.transport
        rate = options.rate_limit
        self.limiter = RateLimiter(rate, transport.sleep, transport.clock) if rate else None
        self.queue: asyncio.Queue[Handed | None] = asyncio.Queue(maxsize=self.concurrency)
        self.stopping = False  # interrupted: no new request starts
        self.reader: asyncio.Task[None] | None = None
        self.errors: dict[str, CampaignKitError | None] = {}
        """The live error of each claim this call settled, by its token."""
        self.suppressed: dict[str, User] = {}
        """The users suppressed when this call planned them, as given, by phone."""
        self.kept: dict[str, tuple[User, ...]] = {}
        """The users of each claim this call had accepted, with ``keep_accepted_users``."""
        self._input_error: BaseException | None = None

    # -- reading

    def _count_held(self, planned: PlannedChunk, held: Sequence[Record]) -> None:
        self.progress.advance(_by_state(held))
        if any(record.state == SUPPRESSED for record in held):
            index = {phone: i for i, phone in enumerate(planned.phones)}
            self.suppressed.update(
                (r.phone, planned.users[index[r.phone]]) for r in held if r.state == SUPPRESSED
            )

    def _count_read(self) -> None:
        self.progress.advance()

    async def read(self, users: Iterable[Any] | AsyncIterable[Any]) -> None:
        hand_over = self.queue.put if self.watch is None else self.watch.gate(self.queue.put)
        try:
            await self.producer.run(users, hand_over)
        except CampaignKitError:
            raise  # the ledger failed: the send fails
        except Exception as exc:
            # The input raised: send what is queued, then re-raise from run().
            self._input_error = exc
        # Not in a finally: once cancelled, a put on a full queue would hang.
        for _ in range(self.concurrency):
            await self.queue.put(None)

    # -- sending

    async def send(self) -> None:
        # Interrupted, the queue holds only the Nones that send the senders home.
        while (handed := await self.queue.get()) is not None:
            # Paced only while requests still leave: after a fatal answer none does.
            if self.limiter is not None and self.producer.fatal is None:
                await self.limiter.wait()
            if not self.stopping:  # interrupted: left planned, for the run's next send
                await self._send(handed)

    async def _send(self, handed: Handed) -> None:
        claim = await self.sender.claim(self.run_name, handed.chunk)
        planned = handed.planned
        whole = claim is not None and len(claim.recipients) == len(planned.phones)
        if not whole:  # deferred by the daily limit, suppressed, or a twin's
            await self._count_lost(handed, claim)
        if claim is None:
            if self.watch is not None:
                self.watch.sent(handed.chunk, None)
            return
        count = len(claim.recipients)
        self.progress.advance({IN_FLIGHT: count})
        try:
            sent = await self.sender.deliver(self.run_name, claim, planned.users if whole else None)
        except asyncio.CancelledError as cancelled:
            self.progress.cancelled(count, cancelled)
            raise
        self.errors[claim.token] = sent.result.error
        if self.watch is not None:
            self.watch.sent(handed.chunk, sent)
        if self.options.keep_accepted_users and sent.result.outcome == "accepted":
            self.kept[claim.token] = (
                planned.users if whole else tuple(_user(r.user) for r in claim.recipients)
            )
        self.progress.advance({OUTCOME_STATE[sent.result.outcome]: count, IN_FLIGHT: -count})

    async def _count_lost(self, handed: Handed, claim: Claim | None) -> None:
        taken = {record.phone for record in handed.held}
        if claim is not None:
            taken.update(recipient.phone for recipient in claim.recipients)
        lost = [phone for phone in handed.planned.phones if phone not in taken]
        if lost:
            found = await self.ledger.held(self.run_name, lost)
            self.progress.advance(_by_state([record for record, _ in found.values()]))

    # -- the call

    async def _work(self, users: Iterable[Any] | AsyncIterable[Any]) -> None:
        async with asyncio.TaskGroup() as group:
            self.reader = group.create_task(self.read(users))
            for _ in range(self.concurrency):
                group.create_task(self.send())

    async def run(self, poll: str, users: Iterable[Any] | AsyncIterable[Any]) -> BulkReport:
        started, since = time.monotonic(), time.time()
        ledger, run = self.ledger, self.run_name
        await self.producer.start(poll)
        try:
            work = until_done(self, self._work(users))
            await (work if self.watch is None else self.watch.during(work))
        except asyncio.CancelledError:
            # Interrupted: the invalid and repeated inputs read so far are the
            # run's too, for its report read from the ledger. The interrupt
            # goes on whatever the ledger does.
            try:
                await self.producer.skip_read()
            except LedgerError:
                logger.exception("send_bulk: the inputs skipped were not recorded")
            raise
        if self._input_error is not None:
            await self.progress.finish()
            error = self._input_error
            error.add_note(
                f"send_bulk: the input raised after {self.producer.planner.total} items; the "
                "full chunks read before it were sent (see the ledger, if any), the partial "
                "one was not"
            )
            raise error
        report = await self._report(time.monotonic() - started)
        # Recipients planned or in flight (not complete) may be a twin's at
        # work: waited for, and read again. Most sends are complete at once.
        if not report.complete:
            await wait_for_twins(ledger, run, since=since)
            report = await self._report(time.monotonic() - started)
        await self.progress.finish(report)
        return report

    async def _report(self, elapsed: float) -> BulkReport:
        """The run's report from the ledger, as this call sees it: what it sent
        itself is not ``resumed`` and keeps the error it met; the invalid,
        repeated and suppressed inputs are the items as given."""
        report = await self.ledger.report(self.run_name)
        live = dict(self.errors)
        live.update((claim.token, self.producer.fatal) for claim in self.producer.rejected)
        keep = self.options.keep_accepted_users
        users = await self._accepted_users(report) if keep else {}
        for outcome in ("accepted", "rejected", "ambiguous"):
            chunks: list[BulkChunk] = getattr(report, outcome)
            for i, chunk in enumerate(chunks):
                if chunk.chunk_id in live:
                    error = live[chunk.chunk_id] or chunk.error
                    chunk = attrs.evolve(chunk, resumed=False, error=error)
                if outcome == "accepted" and users:
                    chunk = attrs.evolve(chunk, users=users.get(chunk.chunk_id or "", ()))
                chunks[i] = chunk
        planner = self.producer.planner
        report.invalid, report.duplicates = planner.invalid, planner.duplicates
        report.suppressed = [
            attrs.evolve(item, user=self.suppressed.get(item.phone, item.user))
            for item in report.suppressed
        ]
        report.keeps_accepted_users = self.options.keep_accepted_users
        report.elapsed = elapsed
        if report.fatal is not None:  # as this call met it, if it did
            report.fatal = next((e for e in self.errors.values() if is_fatal(e)), report.fatal)
        return report

    async def _accepted_users(self, report: BulkReport) -> dict[str, tuple[User, ...]]:
        """The users of the run's accepted recipients, by claim: this call's
        as it sent them, the others' as the ledger keeps them."""
        if all(chunk.chunk_id in self.kept for chunk in report.accepted):
            return self.kept
        users: dict[str, list[User]] = {}
        async for record in self.ledger.records(self.run_name, (ACCEPTED,)):
            if record.claim not in self.kept and record.user is not None:
                users.setdefault(record.claim or "", []).append(_user(record.user))
        return {**self.kept, **{claim: tuple(kept) for claim, kept in users.items()}}


def _user(wire: str) -> User:
    user, reason = as_user(orjson.loads(wire))
    if user is None:
        raise LedgerError(f"a user in the ledger cannot be read: {reason}")
    return user


def _by_state(records: Sequence[Record]) -> dict[str, int]:
    """Progress increments for recipients the ledger holds: someone else's
    planned or in flight ones count ambiguous until the end's reading."""
    counts: dict[str, int] = {}
    for record in records:
        state = AMBIGUOUS if record.state in (PLANNED, IN_FLIGHT) else record.state
        counts[state] = counts.get(state, 0) + 1
    return counts


async def wait_for_twins(
    ledger: Ledger, run: str, *, since: float, patience: float = TWIN_PATIENCE
) -> None:
    """Wait, up to ``patience`` seconds, while another sender of the run (a
    twin) has recipients planned, or in claims taken since ``since`` (the
    send's start), so that the report says what became of them; older claims
    (a sender that died) are not waited for, and stay ambiguous."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        counts = await ledger.counts(run)
        # A paused run's planned recipients wait for a person, not a twin.
        info = await ledger.run_info(run)
        waits = info is None or info.paused is None
        if not (counts[PLANNED] and waits) and not counts[IN_FLIGHT]:
            return
        phones = [r.phone async for r in ledger.records(run, (PLANNED, IN_FLIGHT))]
        held = await ledger.held(run, phones)
        if not any(
            (record.state == PLANNED and waits) or (claimed is not None and claimed >= since)
            for record, claimed in held.values()
        ):
            return
        await asyncio.sleep(0.1)
