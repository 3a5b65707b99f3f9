"""The engine of ``send_bulk``: a reader planning chunks, senders sending them."""

from __future__ import annotations

import asyncio
import time
import uuid
from array import array
from collections.abc import AsyncIterable, Callable, Iterable, Sequence
from typing import Any

import attrs
import orjson

from .._report import BulkReport
from ..errors import CampaignKitError
from ..ledger import ACCEPTED, IN_FLIGHT, Ledger, Record
from ..ledger._build import OUTCOME, Request, build_report
from ..ledger._errors import error_detail
from ..models import User
from ..progress import ProgressUpdate
from ._held import lost_record, settle_held
from ._pacing import OUTCOME_STATE, ProgressReporter, RateLimiter
from ._planner import PlannedChunk, Planner, SeenPhones
from ._rules import NO_RULES, SendRules
from ._seam import BulkClient
from ._sender import ClaimOutcome, is_fatal, send_claim, settle_claim
from ._stopping import DEFAULT_INTERRUPT_GRACE, until_done


# Not slotted: the state built from the options is set in __attrs_post_init__.
@attrs.define(slots=False)
class BulkSend:
    client: BulkClient
    poll_id: str
    segment: str
    chunk_size: int
    concurrency: int
    rate_limit: float | None
    ledger: Ledger
    run_name: str
    retry_rejected: bool
    ignore_suppression: bool
    on_progress: Callable[[ProgressUpdate], object] | None
    keep_accepted_users: bool
    timeout: float | None
    max_retries: int | None
    interrupt_grace: float = DEFAULT_INTERRUPT_GRACE
    seen: SeenPhones | None = None
    """The planner's dedupe set, when the ledger offers one (a memory ledger's run)."""
    rules: SendRules = NO_RULES
    prepare: Callable[[User], tuple[User | None, str | None]] | None = None
    defer: Callable[[str, User], str | None] | None = None

    def __attrs_post_init__(self) -> None:
        rate, transport = self.rate_limit, self.client.transport
        self.limiter = RateLimiter(rate, transport.sleep, transport.clock) if rate else None
        self.sender_id = uuid.uuid4().hex
        self.requests: list[Request] = []
        self.planner = Planner(
            self.chunk_size, seen=self.seen, prepare=self.prepare, defer=self.defer
        )
        self.queue: asyncio.Queue[PlannedChunk | None] = asyncio.Queue(maxsize=self.concurrency)
        self.fatal: CampaignKitError | None = None
        self.acks: dict[str, str] = {}
        self.progress = ProgressReporter(self.on_progress, self.planner)
        self._input_error: BaseException | None = None
        self.stopping = False  # interrupted: no new request starts
        self.reader: asyncio.Task[None] | None = None

    # -- reading

    async def read(self, users: Iterable[Any] | AsyncIterable[Any]) -> None:
        try:
            await self._read(users)
        except Exception as exc:
            # Send what is queued, then re-raise from run().
            self._input_error = exc
        # Not in a finally: once cancelled, a put on a full queue would hang.
        for _ in range(self.concurrency):
            await self.queue.put(None)

    async def _read(self, users: Iterable[Any] | AsyncIterable[Any]) -> None:
        # The per-user work is synchronous (Planner.take); the loop awaits only
        # to hand over a full chunk, and now and then so a long input cannot
        # starve it.
        planner, put = self.planner, self.queue.put
        # After a fatal answer nothing more is read: the rest of the input is
        # left unread (and the run's input not marked finished).
        if isinstance(users, AsyncIterable):
            async for item in users:
                if (chunk := planner.take(item)) is not None:
                    await put(chunk)
                    if self.fatal is not None:
                        break
                elif not planner.total & 511:
                    self.progress.advance()
                    await asyncio.sleep(0)
        else:
            for item in users:
                if (chunk := planner.take(item)) is not None:
                    await put(chunk)
                    if self.fatal is not None:
                        break
                elif not planner.total & 511:
                    self.progress.advance()
                    await asyncio.sleep(0)
        if (chunk := planner.flush()) is not None:
            await put(chunk)

    # -- sending

    async def send(self) -> None:
        # Interrupted, the queue holds only the Nones that send the senders home.
        while (chunk := await self.queue.get()) is not None:
            await self._send_chunk(chunk)

    async def _send_chunk(self, chunk: PlannedChunk) -> None:
        """Plan, claim, send and settle one chunk."""
        ledger = self.ledger
        chunk_id = f"{self.run_name}/{self.sender_id}/{chunk.index}"
        held = await ledger.plan(
            self.run_name,
            chunk_id,
            chunk.recipients,
            retry_rejected=self.retry_rejected,
            ignore_suppression=self.ignore_suppression,
            deferred=chunk.deferred,
        )
        if held:
            self._report_held(chunk, held)
        if len(held) == len(chunk.users):
            return
        if self.limiter is not None:
            await self.limiter.wait()
        if self.stopping:
            return  # interrupted: left planned, for the run's next send to take
        # Committed (durably) before the request leaves.
        claim = await ledger.claim(self.run_name, chunk_id, owner=self.sender_id)
        count = len(chunk.phones)
        if claim is not None and len(claim.recipients) == count:
            # The whole chunk (a claim is of its recipients, in input order): no
            # work a recipient to match them (row 6n).
            claimed: Sequence[int] = range(count)
        else:
            by_phone = {phone: i for i, phone in enumerate(chunk.phones)}
            claimed = [] if claim is None else [by_phone[r.phone] for r in claim.recipients]
            accounted = {by_phone[r.phone] for r in held}.union(claimed)
            lost = [i for i in range(count) if i not in accounted]
            if lost:  # deferred by the daily limit, or taken by another sender of the run
                found = await ledger.held(self.run_name, [chunk.phones[i] for i in lost])
                self._report_held(
                    chunk, [lost_record(found, chunk.phones[i], chunk.positions[i]) for i in lost]
                )
        if claim is None:
            return
        users = (
            chunk.users
            if len(claimed) == len(chunk.users)
            else tuple(chunk.users[i] for i in claimed)
        )
        self.progress.advance({IN_FLIGHT: len(users)})
        if self.fatal is not None:
            # Not sent: filed rejected with the answer that ended the run.
            result = ClaimOutcome("rejected", error=self.fatal)
            await settle_claim(ledger, self.run_name, claim, result)
        else:
            try:
                result = await send_claim(
                    self.client,
                    ledger,
                    self.run_name,
                    self.segment,
                    claim,
                    users=users,
                    rules=self.rules,
                    timeout=self.timeout,
                    max_retries=self.max_retries,
                )
            except asyncio.CancelledError as cancelled:
                self.progress.cancelled(len(users), cancelled)
                raise
        positions = (
            chunk.positions
            if len(claimed) == len(chunk.positions)
            else array("Q", [chunk.positions[i] for i in claimed])
        )
        self._finish(chunk, users, positions, result, claim.token)

    def _report_held(self, chunk: PlannedChunk, records: Sequence[Record]) -> None:
        """Report recipients of ``chunk`` the ledger already holds (not sent
        again) or has suppressed (grouped by reason)."""
        index = {phone: i for i, phone in enumerate(chunk.phones)}
        groups: dict[tuple[str | None, str, str | None], list[Record]] = {}
        for record in records:
            groups.setdefault((record.claim, record.state, record.detail), []).append(record)
        for (claim, state, detail), group in groups.items():
            rows = [index[record.phone] for record in group]
            self._file(
                claim,
                state,
                [chunk.positions[i] for i in rows],
                [chunk.users[i] for i in rows],
                detail=detail,
                ack=self.acks.get(claim or "") if state == ACCEPTED else None,
                resumed=True,
            )

    def _finish(
        self,
        chunk: PlannedChunk,
        users: Sequence[User],
        positions: Sequence[int],
        result: ClaimOutcome,
        claim: str | None = None,
    ) -> None:
        if self.fatal is None and is_fatal(result.error):
            self.fatal = result.error  # the chunks after it are not sent
        ack = None if result.ack is None else orjson.dumps(attrs.asdict(result.ack)).decode()
        detail = None if result.error is None else error_detail(result.error)
        self._file(
            claim,
            OUTCOME_STATE[result.outcome],
            positions,
            users,
            detail=detail,
            ack=ack,
            error=result.error,
        )

    def _file(
        self,
        claim: str | None,
        state: str,
        positions: Sequence[int],
        users: Sequence[User],
        *,
        detail: str | None,
        ack: str | None,
        resumed: bool = False,
        error: CampaignKitError | None = None,
    ) -> None:
        """Keep what became of these users, as the ledger keeps it, for the report
        (suppressed ones are no request's: the report lists them one by one)."""
        outcome = OUTCOME.get(state, state)
        keep = outcome != "accepted" or self.keep_accepted_users
        self.requests.append(
            Request(
                claim,
                state,
                positions,
                users if keep else None,
                detail=detail,
                ack=ack,
                resumed=resumed,
                error=error,
            )
        )
        moved = {OUTCOME_STATE[outcome]: len(positions)}
        # Not resumed: our own claim's users, in flight until now.
        self.progress.advance(moved if resumed else {**moved, IN_FLIGHT: -len(positions)})

    async def _work(self, users: Iterable[Any] | AsyncIterable[Any]) -> None:
        async with asyncio.TaskGroup() as group:
            self.reader = group.create_task(self.read(users))
            for _ in range(self.concurrency):
                group.create_task(self.send())

    async def run(self, users: Iterable[Any] | AsyncIterable[Any]) -> BulkReport:
        started, since = time.monotonic(), time.time()
        await self.ledger.start_run(self.run_name, self.segment, input_pass=self.sender_id)
        await self.ledger.save_run_options(self.run_name, self.rules.options())
        for claim, _, state, ack, _ in await self.ledger.claims(self.run_name):
            if state == ACCEPTED and ack:
                self.acks[claim] = ack
        await until_done(self, self._work(users))
        # Users a twin sender of the run had in flight: what became of them.
        requests = await settle_held(
            self.requests, self.ledger, self.run_name, since=since, advance=self.progress.advance
        )
        report = build_report(
            self.poll_id,
            requests,
            invalid=self.planner.invalid,
            duplicates=self.planner.duplicates,
            total=self.planner.total,
            elapsed=time.monotonic() - started,
            keep_accepted_users=self.keep_accepted_users,
        )
        report.fatal = self.fatal
        if self._input_error is None:
            await self.ledger.skip(self.run_name, self.planner.drain_skipped())
            if self.fatal is None:
                await self.ledger.finish_input(self.run_name, report.total)
        await self.progress.finish()
        if self._input_error is not None:
            error = self._input_error
            error.add_note(
                f"send_bulk: the input raised after {report.total} items; the full chunks "
                "read before it were sent (see the ledger, if any), the partial one was not"
            )
            raise error
        return report
