"""The one pipeline of every bulk send, in process and across workers: a
:class:`Producer` plans the input into the ledger chunk by chunk and hands
each chunk over; a :class:`ChunkSender` claims a chunk, sends it and settles
it. ``send_bulk`` runs them over an asyncio queue, the workers over a task
broker; both read their report from the ledger."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from itertools import islice
from typing import Any, Final

import attrs
import tenacity

from .._backoff import reconnecting
from .._redaction import sdk_logger
from ..errors import CampaignKitError
from ..ledger import Claim, Ledger, LedgerUnavailable, Record, WrongLedger, error_from_detail
from ..models import User
from ._options import BulkOptions
from ._planner import PlannedChunk, Planner, SeenPhones
from ._rules import SendRules, zone_deferral, zone_preparer
from ._seam import BulkClient
from ._sender import ClaimOutcome, reject_unsent, send_claim

log = sdk_logger("campaignkit.bulk")


@attrs.frozen
class Handed:
    """A chunk planned into the ledger, handed over to be sent."""

    chunk: str
    """Its name in the ledger."""
    planned: PlannedChunk
    held: Sequence[Record]
    """The records of those of its recipients the ledger will not send
    (held from earlier, suppressed or deferred)."""


HandOver = Callable[[Handed], Awaitable[object]]
"""``hand_over(handed)``: give a planned chunk to whoever sends it."""

_BATCH: Final = 512
"""Inputs read between two turns of the event loop (and two progress calls)."""


def worker_name() -> str:
    """A name for this process's claims: host, pid and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Producer:
    """Reads a run's input, plans it into ``ledger`` chunk by chunk and hands
    each chunk with recipients to send over (:meth:`run`).

    Chunk names are new to each producer (``input_pass``): a re-read input
    never joins an older chunk. Once a fatal answer has stopped the run, the
    rest of the input is still read and planned, and each chunk is filed
    rejected with that answer here, never handed over (``retry_rejected``
    resends them once the cause is fixed).
    """

    def __init__(
        self,
        ledger: Ledger,
        run: str,
        options: BulkOptions,
        *,
        input_pass: str,
        seen: SeenPhones | None = None,
        on_held: Callable[[PlannedChunk, Sequence[Record]], object] | None = None,
        on_read: Callable[[], object] | None = None,
    ) -> None:
        self.ledger, self.run_name, self.options = ledger, run, options
        self.input_pass = input_pass
        self.planner = Planner(
            options.chunk_size,
            seen=seen,
            prepare=zone_preparer(options.rules, options.tz_for),
            defer=zone_deferral(options.rules),
        )
        self.fatal: CampaignKitError | None = None
        """The answer that stopped the run, once the producer has seen it."""
        self.rejected: list[Claim] = []
        """The claims this producer filed rejected with :attr:`fatal`."""
        self._on_held = on_held
        self._on_read = on_read

    async def start(self, poll: str) -> None:
        """Start (or resume) the run for ``poll`` as a new pass over its
        input, with the send window, daily limit and lines of the options
        kept for every sender of the run."""
        await self.ledger.start_run(self.run_name, poll, input_pass=self.input_pass)
        options = {**self.options.rules.options(), **self.options.guards()}
        await self.ledger.save_run_options(self.run_name, options)

    async def run(self, users: Iterable[Any] | AsyncIterable[Any], hand_over: HandOver) -> None:
        """Plan ``users`` and ``await hand_over(handed)`` for each chunk with
        recipients to send; then record the input as finished (``total`` items)."""
        planner = self.planner
        async for batch in _batches(
            users, lambda: min(planner.room, _BATCH - planner.total % _BATCH)
        ):
            if (chunk := planner.take_many(batch)) is not None:
                await self._plan(chunk, hand_over)
            if planner.total % _BATCH == 0:
                if self._on_read is not None:
                    self._on_read()
                await asyncio.sleep(0)  # a long input must not starve the senders
        await self._plan(self.planner.flush(), hand_over)
        await self.ledger.finish_input(self.run_name, self.planner.total)

    async def skip_read(self) -> None:
        """File the invalid and repeated inputs read and not filed yet."""
        await self.ledger.skip(self.run_name, self.planner.drain_skipped())

    async def _plan(self, planned: PlannedChunk | None, hand_over: HandOver) -> None:
        ledger, run = self.ledger, self.run_name
        await self.skip_read()
        if planned is None:
            return
        chunk = f"{self.input_pass}-{planned.index:06d}"
        held = await ledger.plan(
            run,
            chunk,
            planned.recipients,
            retry_rejected=self.options.retry_rejected,
            ignore_suppression=self.options.ignore_suppression,
            deferred=planned.deferred,
        )
        if held and self._on_held is not None:
            self._on_held(planned, held)
        if len(held) == len(planned.phones):
            return
        # A fatal answer (any sender's) ends the run: nothing more is handed over.
        info = held.run if self.fatal is None else None
        if info is not None and info.stopped:
            log.warning("run %s: stopped by a fatal answer: %s", run, info.stopped)
            self.fatal = error_from_detail(info.stopped)
        if info is not None and info.paused is not None:
            return  # left planned: the send after its resumption hands it over
        if self.fatal is None:
            await hand_over(Handed(chunk, planned, held))
        elif (
            claim := await ledger.claim(run, chunk, owner=f"producer:{self.input_pass}")
        ) is not None:
            await reject_unsent(ledger, run, claim, self.fatal)
            self.rejected.append(claim)


async def _batches(
    users: Iterable[Any] | AsyncIterable[Any], size: Callable[[], int]
) -> AsyncIterator[Sequence[Any]]:
    """The one input loop's batches: an iterable's items ``size()`` at a time
    (what the planner's chunk has room for, up to the next turn of the loop:
    a batch completes a chunk only with its last item), an async iterable's
    one by one, as they come. An item that raises leaves the batch read
    before it to take first: the exception comes with the next batch."""
    if isinstance(users, AsyncIterable):
        async for item in users:
            yield (item,)
        return
    items = iter(users)
    while True:
        batch: list[Any] = []
        try:
            # extend() keeps the items it appended when the iterator raises.
            batch.extend(islice(items, size()))
        except BaseException:
            if batch:
                yield batch
            raise
        if not batch:
            return
        yield batch


@attrs.frozen
class Sent:
    """What :meth:`ChunkSender.deliver` did with one claim."""

    claim: Claim
    result: ClaimOutcome
    unsent: bool
    """Filed rejected with the answer that stopped the run, not sent."""


class ChunkSender:
    """The only sender of a bulk send's chunks: :meth:`send` claims a chunk of
    a run, sends its recipients with the client's send rules and the run's
    send window and lines, and settles the claim.

    ``owner`` names this sender in its claims (default: host, pid and a
    random part); ``timeout`` and ``max_retries`` apply to each request.
    """

    def __init__(
        self,
        client: BulkClient,
        ledger: Ledger,
        *,
        owner: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> None:
        self.client, self.ledger = client, ledger
        self.owner = owner or worker_name()
        self.timeout, self.max_retries = timeout, max_retries
        self._found: set[str] = set()
        """The runs found in the ledger: a run is never removed from one."""

    async def send(
        self, run: str, chunk: str, *, ledger_identity: str | None = None
    ) -> Sent | None:
        """Claim ``chunk`` of ``run``, send it and settle it; None when nothing
        was left to claim (see :func:`campaignkit.workers.send_chunk`)."""
        claim = await self.claim(run, chunk, ledger_identity=ledger_identity)
        return None if claim is None else await self.deliver(run, claim)

    async def claim(
        self, run: str, chunk: str, *, ledger_identity: str | None = None
    ) -> Claim | None:
        """Atomically take the planned recipients of ``chunk``, tried again
        while the ledger's connection is lost (for its ``reconnect_timeout``)
        rather than fail: an engine would acknowledge a failed task, and its
        chunk would stay planned. A claim that committed before its
        connection was lost leaves nothing to claim again (its recipients are
        reported ambiguous once it expires), never a chunk claimed twice."""
        ledger = self.ledger
        if ledger_identity is not None and ledger_identity != ledger.identity:
            raise WrongLedger(
                f"run {run} chunk {chunk} belongs to ledger {ledger_identity}, and this "
                f"worker's ledger {ledger!r} is ledger {ledger.identity}"
            )
        if run not in self._found and await ledger.run_info(run) is None:
            raise WrongLedger(
                f"run {run} chunk {chunk}: no run named {run!r} in this worker's ledger "
                f"{ledger!r} (ledger {ledger.identity}): is it the producer's ledger?"
            )
        self._found.add(run)
        retrying = reconnecting(
            LedgerUnavailable,
            tenacity.stop_after_delay(getattr(ledger, "reconnect_timeout", 0.0)),
            lambda lost, delay, attempt: log.warning(
                "%s: claiming %s again in %.1f s (attempt %d)", lost, chunk, delay, attempt
            ),
        )
        claim: Claim | None = await retrying(ledger.claim, run, chunk, owner=self.owner)
        if claim is None and (info := await ledger.run_info(run)) and info.paused:
            log.warning(
                "run %s chunk %s: not sent, the run is paused (%s: %s); resuming it "
                "(campaignkit runs %s --resume) and its next send hand it over",
                *(run, chunk, info.paused.reason, info.paused.detail, run),
            )
        return claim

    async def deliver(self, run: str, claim: Claim, users: Sequence[User] | None = None) -> Sent:
        """Send the recipients of ``claim`` and settle it (``users``: theirs,
        in its order, when the caller has them). Once any sender's fatal
        answer has stopped the run, they are filed rejected with it, unsent."""
        ledger = self.ledger
        # The run as the claim's transaction read it, as late as can be before
        # the request would leave: once a fatal answer ended the run, nobody
        # sends for it again.
        info = claim.run
        if info is None:
            raise WrongLedger(f"run {run}: not in {ledger!r} when its chunk was claimed")
        if info.stopped is not None:
            result = await reject_unsent(ledger, run, claim, error_from_detail(info.stopped))
            return Sent(claim, result, unsent=True)
        # The producer's send window and lines, as it stored them with the run.
        rules = SendRules.from_options(claim.options)
        result = await send_claim(
            self.client,
            ledger,
            run,
            info.poll,
            claim,
            users=users,
            rules=rules,
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        return Sent(claim, result, unsent=False)
