"""The two halves of a run over workers, for any task engine (taskiq,
Celery, arq, Dramatiq, Temporal): :func:`submit_run` plans the input into the
ledger and hands each chunk to an ``enqueue`` of yours; :func:`send_chunk`,
the coroutine a worker's task runs, claims one chunk, sends it and settles it.
:class:`~campaignkit.workers.BulkWorkers` is these two on taskiq."""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Literal

import attrs

from .._backoff import reconnect_delay
from .._input.validation import raise_problems
from .._redaction import sdk_logger
from ..bulk import (
    DEFAULT_CHUNK_SIZE,
    ClaimOutcome,
    PlannedChunk,
    Planner,
    SendRules,
    SendWindow,
    TzFor,
    UserInput,
    bulk_problems,
    default_run,
    rules_problems,
    send_claim,
    zone_deferral,
    zone_preparer,
)
from ..bulk._sender import settle_claim
from ..client import CampaignClient
from ..errors import CampaignKitError
from ..ledger import Claim, Ledger, WrongLedger
from ..ledger._errors import error_from_detail
from ..ledger._schema import LedgerUnavailable
from ..models import CampaignAck

log = sdk_logger("campaignkit.workers")

Enqueue = Callable[[str, str], Awaitable[object]]
"""``enqueue(run, chunk)``: give one chunk of a run to the workers (a task message)."""


@attrs.frozen
class ChunkResult:
    """What :func:`send_chunk` did with one chunk: its ``users`` were sent in
    one request, ``accepted`` (with its ``ack``), ``rejected`` (surely not
    taken: ``error``) or ``ambiguous`` (may have reached the service)."""

    outcome: Literal["accepted", "rejected", "ambiguous"]
    users: int
    ack: CampaignAck | None = None
    error: CampaignKitError | None = attrs.field(default=None, repr=False)


def worker_name() -> str:
    """A name for this process's claims: host, pid and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def send_chunk(
    client: CampaignClient,
    ledger: Ledger,
    run: str,
    chunk: str,
    *,
    owner: str | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    ledger_identity: str | None = None,
) -> ChunkResult | None:
    """Claim ``chunk`` of ``run`` in ``ledger`` (open, shared with the
    producer), send its recipients with ``client``'s send rules and the run's
    send window and lines, and settle the claim; None when nothing was left
    to claim (a task delivered twice, or retried after it sent).

    Call it from a task of any engine, with the ``(run, chunk)`` that
    :func:`submit_run` gave your ``enqueue``: retrying it, or running it
    twice at once, never sends anyone twice. ``owner`` names this worker in
    its claims (default: host, pid and a random part). ``ledger_identity``:
    the :attr:`~campaignkit.ledger.Ledger.identity` of the producer's ledger,
    as your task message carries it. Cancelled while its
    request is under way, the claim is settled ambiguous and the
    cancellation goes on (cancelled while waiting to retry a 429, its
    recipients are planned again, for the task run again to send); a
    worker killed then leaves a claim that expires (the ledger's
    ``claim_ttl``) and is reported ambiguous. Raises
    :class:`~campaignkit.ledger.WrongLedger`, claiming nothing, when
    ``ledger`` is not the producer's (another identity, or no such run):
    give the message back to the queue for a worker of that ledger, never
    drop it (``campaignkit worker`` does so). Raises
    :class:`~campaignkit.errors.LedgerError` when the
    ledger stays unreachable for longer than its ``reconnect_timeout``
    before the request: run the task again then (``campaignkit worker``
    does), or the chunk stays planned. Once the service answered, its
    outcome is settled however long the ledger is lost, until the claim
    expires (then its recipients are reported ambiguous, and the error is
    raised); cancelled meanwhile, the settle is finished first.

    A fatal answer (a 401, a 404 for the poll, a 400 refusing the whole
    request) ends the run for every worker, as it ends ``send_bulk``: it is
    recorded on the run (:meth:`~campaignkit.ledger.Ledger.stop_run`), and
    every chunk claimed after it is filed rejected with that error, unsent.
    """
    if ledger_identity is not None and ledger_identity != ledger.identity:
        raise WrongLedger(
            f"run {run} chunk {chunk} belongs to ledger {ledger_identity}, and this worker's "
            f"ledger {ledger!r} is ledger {ledger.identity}"
        )
    info = await ledger.run_info(run)
    if info is None:
        raise WrongLedger(
            f"run {run} chunk {chunk}: no run named {run!r} in this worker's ledger {ledger!r} "
            f"(ledger {ledger.identity}): is it the producer's ledger?"
        )
    # The producer's send window and lines, as it stored them with the run
    # (read before the claim: a claim is never left in flight by a failure here).
    rules = SendRules.from_options(await ledger.run_options(run))
    claim = await _claim(ledger, run, chunk, owner or worker_name())
    if claim is None:
        return None
    # Read after the claim, as late as can be before the request would leave:
    # once any worker's fatal answer ended the run, nobody sends for it again.
    stopped = (await ledger.run_info(run) or info).stopped
    if stopped is not None:
        outcome = ClaimOutcome("rejected", error=error_from_detail(stopped))
        await settle_claim(ledger, run, claim, outcome)
    else:
        outcome = await send_claim(
            client,
            ledger,
            run,
            info.poll,
            claim,
            rules=rules,
            timeout=timeout,
            max_retries=max_retries,
        )
    return ChunkResult(outcome.outcome, len(claim.recipients), outcome.ack, outcome.error)


async def _claim(ledger: Ledger, run: str, chunk: str, owner: str) -> Claim | None:
    """``ledger.claim``, tried again while the ledger's connection is lost (for
    its ``reconnect_timeout``) rather than fail the task: an engine would
    acknowledge a failed task, and its chunk would stay planned. A claim is
    atomic: one that committed before its connection was lost leaves nothing
    to claim again (its recipients are reported ambiguous once it expires),
    never a chunk claimed twice."""
    deadline = time.monotonic() + getattr(ledger, "reconnect_timeout", 0.0)
    attempt = 0
    while True:
        attempt += 1
        try:
            return await ledger.claim(run, chunk, owner=owner)
        except LedgerUnavailable as lost:
            if time.monotonic() >= deadline:
                raise
            delay = reconnect_delay(attempt)
            log.warning("%s: claiming %s again in %.1f s (attempt %d)", lost, chunk, delay, attempt)
            await asyncio.sleep(delay)


async def submit_run(
    ledger: Ledger,
    poll_id: int | str,
    users: UserInput,
    *,
    enqueue: Enqueue,
    run: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    retry_rejected: bool = False,
    ignore_suppression: bool = False,
    send_window: SendWindow | None = None,
    daily_limit: int | None = None,
    lines: Sequence[str] | None = None,
    tz_for: TzFor | None = None,
    default_tz: str | None = None,
) -> str:
    """Plan ``users`` into ``ledger`` (open) and ``await enqueue(run, chunk)``
    for each chunk, for the workers' :func:`send_chunk`; the run's name.

    Call it again with the same ``run`` after a crash (with the same input,
    or another): chunks planned but perhaps never enqueued are enqueued
    again, and only recipients the run does not hold yet (and rejected ones
    with ``retry_rejected``) are planned. A recipient whose phone is on the
    ledger's suppression list when it is planned is filed suppressed, never
    sent, unless ``ignore_suppression`` (this call only). Returns once the whole input is
    planned (the workers may still be sending), or once a worker's fatal
    answer has stopped the run (the rest left unread). A bad ``poll_id``,
    ``chunk_size`` or rule raises ``ValidationError`` first.
    ``send_window``, ``daily_limit``, ``lines``, ``tz_for`` and
    ``default_tz`` are those of ``send_bulk``: stored with the run, the
    workers apply them (recipients the window cannot be held for are filed
    deferred here, as they are planned). Let your task message carry
    ``ledger.identity`` too, for :func:`send_chunk`'s ``ledger_identity``: a
    worker on another ledger then leaves it.
    """
    segment, problems = bulk_problems(poll_id, users, chunk_size=chunk_size, run=run)
    rules, rule_problems = rules_problems(send_window, daily_limit, lines, tz_for, default_tz)
    raise_problems(problems + rule_problems)
    name = run or default_run(segment)
    # Chunk names are new to each producer: a re-read input never joins an older chunk.
    input_pass = uuid.uuid4().hex[:8]
    prefix = f"{input_pass}-"
    await ledger.start_run(name, segment, input_pass=input_pass)
    await ledger.save_run_options(name, rules.options())

    async def hand_over(chunk: str) -> None:
        await enqueue(name, chunk)
        await ledger.mark_enqueued(name, chunk)

    for chunk in await ledger.unenqueued_chunks(name):
        await hand_over(chunk)
    planner = Planner(chunk_size, prepare=zone_preparer(rules, tz_for), defer=zone_deferral(rules))

    async def plan(planned: PlannedChunk | None) -> None:
        await ledger.skip(name, planner.drain_skipped())
        if planned is None:
            return
        chunk = f"{prefix}{planned.index:06d}"
        held = await ledger.plan(
            name,
            chunk,
            planned.recipients,
            retry_rejected=retry_rejected,
            ignore_suppression=ignore_suppression,
            deferred=planned.deferred,
        )
        if len(held) < len(planned.recipients):
            await hand_over(chunk)

    async for item in _items(users):
        if (planned := planner.take(item)) is not None:
            await plan(planned)
            # A worker's fatal answer ends the run: as send_bulk does, the
            # rest of the input is left unread (and the input unfinished).
            if (info := await ledger.run_info(name)) is not None and info.stopped is not None:
                log.warning("submit %s: stopped by a fatal answer: %s", name, info.stopped)
                return name
    await plan(planner.flush())
    await ledger.finish_input(name, planner.total)
    return name


async def _items(users: UserInput) -> AsyncIterator[Any]:
    if isinstance(users, AsyncIterable):
        async for item in users:
            yield item
    else:
        for item in users:
            yield item
