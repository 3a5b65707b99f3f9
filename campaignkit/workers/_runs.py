"""The two halves of a run over workers, for any task engine (taskiq,
Celery, arq, Dramatiq, Temporal): :func:`submit_run` plans the input into the
ledger and hands each chunk to an ``enqueue`` of yours; :func:`send_chunk`,
the coroutine a worker's task runs, claims one chunk, sends it and settles it.
:class:`~campaignkit.workers.BulkWorkers` is these two on taskiq."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Literal, Unpack

import attrs

from .._input.validation import raise_problems
from ..bulk import (
    BulkOptions,
    BulkOptionsDict,
    ChunkSender,
    Handed,
    Producer,
    UserInput,
    checked_options,
    default_run,
    workers_canary,
)
from ..client import CampaignClient
from ..errors import CampaignKitError
from ..ledger import Ledger
from ..models import CampaignAck

Enqueue = Callable[[str, str], Awaitable[object]]
"""``enqueue(run, chunk)``: give one chunk of a run to the workers (a task message)."""

IN_PROCESS_ONLY = (
    "concurrency",
    "rate_limit",
    "journal",
    "on_progress",
    "keep_accepted_users",
    "timeout",
    "max_retries",
    "interrupt_grace",
    "follow",
    "follow_timeout",
    "dry_run",
)
"""The options of a send in one process that a submit does not take (the
workers' ``timeout`` and ``max_retries`` are :class:`BulkWorkers`')."""


@attrs.frozen
class ChunkResult:
    """What :func:`send_chunk` did with one chunk: its ``users`` were sent in
    one request, ``accepted`` (with its ``ack``), ``rejected`` (surely not
    taken: ``error``) or ``ambiguous`` (may have reached the service)."""

    outcome: Literal["accepted", "rejected", "ambiguous"]
    users: int
    ack: CampaignAck | None = None
    error: CampaignKitError | None = attrs.field(default=None, repr=False)


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
    sender = ChunkSender(client, ledger, owner=owner, timeout=timeout, max_retries=max_retries)
    sent = await sender.send(run, chunk, ledger_identity=ledger_identity)
    if sent is None:
        return None
    result = sent.result
    return ChunkResult(result.outcome, len(sent.claim.recipients), result.ack, result.error)


async def submit_run(
    ledger: Ledger,
    poll_id: int | str,
    users: UserInput,
    *,
    enqueue: Enqueue,
    client: CampaignClient | None = None,
    options: BulkOptions | None = None,
    **keywords: Unpack[BulkOptionsDict],
) -> str:
    """Plan ``users`` into ``ledger`` (open) and ``await enqueue(run, chunk)``
    for each chunk, for the workers' :func:`send_chunk`; the run's name.

    Call it again with the same ``run`` after a crash (with the same input,
    or another): chunks planned but perhaps never enqueued are enqueued
    again, and only recipients the run does not hold yet (and rejected ones
    with ``retry_rejected``) are planned. A recipient whose phone is on the
    ledger's suppression list when it is planned is filed suppressed, never
    sent, unless ``ignore_suppression`` (this call only). Returns once the whole input is
    planned (the workers may still be sending). Once a worker's fatal answer
    has stopped the run, the rest of the input is still read and planned, and
    filed rejected with that answer here, never handed over (``retry_rejected``
    resends them once the cause is fixed). A bad ``poll_id``,
    ``chunk_size`` or rule raises ``ValidationError`` first.
    ``send_window``, ``daily_limit``, ``lines``, ``tz_for`` and
    ``default_tz`` are those of ``send_bulk``: stored with the run, the
    workers apply them (recipients the window cannot be held for are filed
    deferred here, as they are planned). The options: ``options=BulkOptions(...)``
    or its fields as keywords; those only a send in one process takes
    (``concurrency``, ``follow``...) are refused. Let your task message carry
    ``ledger.identity`` too, for :func:`send_chunk`'s ``ledger_identity``: a
    worker on another ledger then leaves it.

    A ``canary`` holds for every worker as it does for ``send_bulk``: its
    recipients alone are handed over, then this call waits for the workers
    to settle them, follows their launches with ``client`` (required with
    a canary) and judges them, the run paused meanwhile; only if they hold
    is the rest handed over. Otherwise the run stays paused with the
    figures, the rest planned and never enqueued: once it is resumed
    (``campaignkit runs RUN --resume``, ``ledger.resume_run``), the run's
    next submit hands it over. A submit stopped while the canary is judged
    leaves the run paused so: the next one judges it.
    """
    segment, options = checked_options(poll_id, users, options, keywords)
    options.refuse(IN_PROCESS_ONLY, "applies to send_bulk in one process, not to a submit")
    if options.canary is not None and client is None:
        raise_problems([("client", "a submit with a canary follows its launches: give client=")])
    name = options.run or default_run(segment)
    producer = Producer(ledger, name, options, input_pass=uuid.uuid4().hex[:8])
    await producer.start(segment)

    async def hand_over(chunk: str) -> None:
        await enqueue(name, chunk)
        await ledger.mark_enqueued(name, chunk)

    async def hand_over_unenqueued() -> None:
        info = await ledger.run_info(name)
        if info is not None and info.paused is not None:
            return  # left planned, never enqueued: the submit after its resumption hands them over
        for chunk in await ledger.unenqueued_chunks(name):
            await hand_over(chunk)

    async def hand_over_planned(handed: Handed) -> None:
        await hand_over(handed.chunk)

    if options.canary is None:
        await hand_over_unenqueued()
        await producer.run(users, hand_over_planned)
        return name
    assert client is not None  # checked with the options
    async with workers_canary(client, ledger, name, options.canary, producer.planner) as canary:
        # A canary still to send: chunks never enqueued go once it is judged
        # (the input re-read meanwhile plans their recipients behind its gate).
        held_back = canary.gated
        if not held_back:
            await hand_over_unenqueued()
        await producer.run(users, canary.gate(hand_over_planned))
    if held_back and not canary.gated:
        await hand_over_unenqueued()
    return name
