"""``send_bulk``: one process streaming users to a poll in chunks."""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import attrs
import orjson

from .._csv import InvalidInput
from .._report import BulkChunk, BulkProgress, BulkReport
from .._validation import raise_problems
from ..errors import AuthenticationError, CampaignKitError, NotFoundError
from ..ledger import ACCEPTED, IN_FLIGHT, Ledger, Record, ledger_from
from ..models import CampaignAck, User
from ._held import grouped, held_outcome
from ._options import bulk_problems
from ._pacing import PROGRESS_FIELD, ProgressReporter, RateLimiter
from ._planner import PlannedChunk, Planner
from ._sender import ClaimOutcome, send_claim, send_request

if TYPE_CHECKING:
    from ..client import CampaignClient

logger = logging.getLogger("campaignkit.bulk")

DEFAULT_CHUNK_SIZE: Final = 1000
"""Users per request. The spec states no maximum users per campaign request;
1000 keeps a body near 100 KB and a lost chunk small."""


UserInput: TypeAlias = (
    Iterable[User | Mapping[str, Any] | InvalidInput]
    | AsyncIterable[User | Mapping[str, Any] | InvalidInput]
)
"""What ``send_bulk`` reads: Users, wire-shaped dicts or :class:`InvalidInput`."""
JournalPath: TypeAlias = "str | os.PathLike[str] | Ledger"
ProgressCallback: TypeAlias = Callable[[BulkProgress], Awaitable[None] | None]

_FATAL = (AuthenticationError, NotFoundError)


def default_run(poll_id: str | int) -> str:
    """The run a ledger files a poll's sends under when no ``run=`` names one."""
    return f"poll-{poll_id}"


# Not slotted: the state built from the options is set in __attrs_post_init__.
@attrs.define(slots=False)
class _BulkSend:
    client: CampaignClient
    poll_id: str
    segment: str
    chunk_size: int
    concurrency: int
    rate_limit: float | None
    ledger: Ledger | None
    run_name: str
    retry_rejected: bool
    on_progress: Callable[[BulkProgress], object] | None
    keep_accepted_users: bool
    timeout: float | None
    max_retries: int | None

    def __attrs_post_init__(self) -> None:
        sleep = self.client.transport.sleep
        self.limiter = None if self.rate_limit is None else RateLimiter(self.rate_limit, sleep)
        self.sender_id = uuid.uuid4().hex
        self.report = BulkReport(self.poll_id, keeps_accepted_users=self.keep_accepted_users)
        self.planner = Planner(self.chunk_size)
        self.queue: asyncio.Queue[PlannedChunk | None] = asyncio.Queue(maxsize=self.concurrency)
        self.fatal: CampaignKitError | None = None
        self.acks: dict[str, CampaignAck] = {}
        self.progress = ProgressReporter(self.on_progress, self.planner)
        self._input_error: BaseException | None = None

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
        if isinstance(users, AsyncIterable):
            async for item in users:
                if (chunk := planner.take(item)) is not None:
                    await put(chunk)
                elif not planner.total & 511:
                    self.progress.advance()
                    await asyncio.sleep(0)
        else:
            for item in users:
                if (chunk := planner.take(item)) is not None:
                    await put(chunk)
                elif not planner.total & 511:
                    self.progress.advance()
                    await asyncio.sleep(0)
        if (chunk := planner.flush()) is not None:
            await put(chunk)

    # -- sending

    async def send(self) -> None:
        while True:
            chunk = await self.queue.get()
            if chunk is None:
                return
            if self.fatal is not None:
                self._finish(
                    chunk, chunk.users, chunk.positions, ClaimOutcome("rejected", error=self.fatal)
                )
            elif self.ledger is None:
                await self._send_unjournaled(chunk)
            else:
                await self._send_journaled(chunk, self.ledger)

    async def _send_unjournaled(self, chunk: PlannedChunk) -> None:
        if self.limiter is not None:
            await self.limiter.wait()
        self.progress.advance({"sent": len(chunk.users)})
        result = await send_request(
            self.client,
            self.segment,
            chunk.body,
            chunk.users,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        self._settled(chunk, chunk.users, chunk.positions, result)

    async def _send_journaled(self, chunk: PlannedChunk, ledger: Ledger) -> None:
        chunk_id = f"{self.run_name}/{self.sender_id}/{chunk.index}"
        held = await ledger.plan(
            self.run_name, chunk_id, chunk.recipients, retry_rejected=self.retry_rejected
        )
        for record_group in grouped(held):
            self._report_held(chunk, record_group)
        if len(held) == len(chunk.users):
            return
        if self.limiter is not None:
            await self.limiter.wait()
        # Committed (durably) before the request leaves.
        claim = await ledger.claim(self.run_name, chunk_id, owner=self.sender_id)
        by_phone = {phone: i for i, phone in enumerate(chunk.phones)}
        claimed = [] if claim is None else [by_phone[r.phone] for r in claim.recipients]
        accounted = {by_phone[r.phone] for r in held}.union(claimed)
        lost = [i for i in range(len(chunk.phones)) if i not in accounted]
        if lost:  # claimed between our plan and claim by another sender of the run
            self._report_held(
                chunk, [Record(chunk.phones[i], chunk.positions[i], IN_FLIGHT) for i in lost]
            )
        if claim is None:
            return
        users = tuple(chunk.users[i] for i in claimed)
        self.progress.advance({"sent": len(users)})
        result = await send_claim(
            self.client,
            ledger,
            self.run_name,
            self.segment,
            claim,
            users=users,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        self._settled(chunk, users, [chunk.positions[i] for i in claimed], result, claim.token)

    def _settled(
        self,
        chunk: PlannedChunk,
        users: Sequence[User],
        positions: Sequence[int],
        result: ClaimOutcome,
        claim: str | None = None,
    ) -> None:
        if isinstance(result.error, _FATAL) and self.fatal is None:
            self.fatal = result.error
        self._finish(chunk, users, positions, result, claim)

    def _report_held(self, chunk: PlannedChunk, records: Sequence[Record]) -> None:
        """Report recipients of ``chunk`` the ledger already holds: not sent again."""
        index = {phone: i for i, phone in enumerate(chunk.phones)}
        users = [chunk.users[index[r.phone]] for r in records]
        positions = [chunk.positions[index[r.phone]] for r in records]
        result = held_outcome(records[0], users, self.acks)
        self._finish(chunk, users, positions, result, records[0].claim, resumed=True)

    def _finish(
        self,
        chunk: PlannedChunk,
        users: Sequence[User],
        positions: Sequence[int],
        result: ClaimOutcome,
        claim: str | None = None,
        *,
        resumed: bool = False,
    ) -> None:
        keep = result.outcome != "accepted" or self.keep_accepted_users
        report_chunk = BulkChunk(
            chunk.index,
            claim,
            result.outcome,
            len(users),
            ack=result.ack,
            error=result.error,
            resumed=resumed,
            positions=positions,
            users=tuple(users) if keep else None,
        )
        getattr(self.report, result.outcome).append(report_chunk)
        self.progress.advance({PROGRESS_FIELD[result.outcome]: len(users)})

    async def run(self, users: Iterable[Any] | AsyncIterable[Any]) -> BulkReport:
        started = time.monotonic()
        if self.ledger is not None:
            await self.ledger.start_run(self.run_name, self.segment, input_pass=self.sender_id)
            for _, _, state, ack, _ in await self.ledger.claims(self.run_name):
                if state == ACCEPTED and ack:
                    parsed = CampaignAck(**orjson.loads(ack))
                    self.acks[parsed.launch_request_id] = parsed
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.read(users))
                for _ in range(self.concurrency):
                    group.create_task(self.send())
        except BaseException as failed:  # a sender's error, or cancelled
            await self.progress.cancel()
            if isinstance(failed, BaseExceptionGroup) and len(failed.exceptions) == 1:
                raise failed.exceptions[0] from None
            raise
        report = self.report
        report.total = self.planner.total
        report.invalid = self.planner.invalid
        report.duplicates = self.planner.duplicates
        for name in ("accepted", "rejected", "ambiguous"):
            getattr(report, name).sort(key=lambda chunk: (chunk.index, chunk.positions[:1]))
        report.elapsed = time.monotonic() - started
        if self.ledger is not None and self._input_error is None:
            await self.ledger.skip(self.run_name, self.planner.drain_skipped())
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


async def send_bulk(
    client: CampaignClient,
    poll_id: str | int,
    users: UserInput,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    concurrency: int = 4,
    rate_limit: float | None = None,
    journal: JournalPath | None = None,
    run: str | None = None,
    retry_rejected: bool = False,
    on_progress: ProgressCallback | None = None,
    keep_accepted_users: bool = False,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> BulkReport:
    """Send ``users`` to ``poll_id`` in chunks; see :mod:`campaignkit.bulk`.

    ``users``: any iterable or async iterable of :class:`User` or wire-shaped
    dicts (``cellphone``, ``country_code``, ``user_session_keys`` as a list of
    ``{key, value}`` or a mapping, ``deployment_eta``), read lazily.
    ``rate_limit``: at most that many chunk requests started per second.
    ``journal``: a delivery ledger (an SQLite path, a ``postgresql://`` DSN or
    a ledger object) filing every recipient under ``run`` (default
    ``poll-<poll_id>``): a rerun never sends again a recipient the ledger holds
    as in flight, accepted or ambiguous, whatever the input order or chunk
    size; rejected ones go again only with ``retry_rejected``. A ledger object
    is opened if it is not, and left to its owner to close.
    ``on_progress`` receives a :class:`BulkProgress` at most every 0.1 s and
    once at the end (an exception in it is logged, not raised).

    Raises :class:`ValidationError` for a bad ``poll_id`` or option before
    anything is sent; per-user problems and request failures go in the report.
    """
    segment, problems = bulk_problems(
        poll_id,
        users,
        chunk_size=chunk_size,
        concurrency=concurrency,
        rate_limit=rate_limit,
        run=run,
    )
    if journal is None and (run is not None or retry_rejected):
        problems.append(("journal", "run= and retry_rejected= need a journal (a ledger)"))
    raise_problems(problems)
    ledger = None if journal is None else ledger_from(journal)
    owned = ledger is not None and ledger is not journal
    run_name = run or default_run(segment)
    try:
        if ledger is not None:
            await ledger.open()
        bulk = _BulkSend(
            client,
            str(poll_id),
            segment,
            chunk_size=chunk_size,
            concurrency=concurrency,
            rate_limit=rate_limit,
            ledger=ledger,
            run_name=run_name,
            retry_rejected=retry_rejected,
            on_progress=on_progress,
            keep_accepted_users=keep_accepted_users,
            timeout=timeout,
            max_retries=max_retries,
        )
        return await bulk.run(users)
    finally:
        if owned and ledger is not None:
            await ledger.close()
