"""Following a run: track every accepted launch of a run until it settles and
write its recipients' outcomes into the run's ledger.

Launches are tracked ``concurrency`` at a time (one tracker each) until
they settle (every deployment out of progress). A launch whose every
deployment is final (delivered or failed) is marked so in the same
transaction as its last statuses, and is never tracked again; following
again (after an interruption, or later to learn which ``SUCCESS`` became
``DELIVERED``) tracks only the others. Statuses are written in bulk: the
latest one per recipient since the last write, every ``FLUSH_ROWS`` changes
and at the end of each launch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Final

import orjson

from .._funnel import Funnel
from .._redaction import sdk_logger
from ..errors import LedgerError, ValidationError
from ..ledger import ACCEPTED, Journal, Ledger, StatusRow, ledger_from
from ..models import CampaignAck
from ..tracker import CampaignTracker, DeploymentChange, StatusSource, TrackOptions
from ._seam import BulkClient

log = sdk_logger("campaignkit.bulk")

FLUSH_ROWS: Final = 5000
"""Status changes held before they are written (and at the end of each launch)."""
DEFAULT_FOLLOW_CONCURRENCY: Final = 8
"""Launches tracked at once."""


def _digits(text: str) -> str:
    return text if text.isdigit() else "".join(char for char in text if char.isdigit())


class LaunchPhones:
    """The recipients of one launch, found by a deployment's ``cellphone``.

    A deployment names its user by the cellphone, without the country code
    (or with it): each recipient is filed under its digits after every
    possible country code (1 to 4 digits) and under all of them; a number two
    recipients would share is nobody's (not guessed).
    """

    __slots__ = ("_by_digits",)

    def __init__(self, phones: Iterable[str]) -> None:
        by_digits: dict[str, str | None] = {}
        for phone in phones:
            digits = phone[1:]
            for national in (digits, *(digits[k:] for k in range(1, 5))):
                found = by_digits.setdefault(national, phone)
                if found is not None and found != phone:
                    by_digits[national] = None
        self._by_digits = by_digits

    def phone_of(self, cellphone: str) -> str | None:
        return self._by_digits.get(_digits(cellphone))


class _Writer:
    """The latest status of each recipient since the last write, written in
    one statement (serialised: a launch is marked final only after every
    change read before it is written)."""

    def __init__(self, ledger: Ledger, run: str) -> None:
        self._ledger = ledger
        self._run = run
        self._pending: dict[str, StatusRow] = {}
        self._lock = asyncio.Lock()
        self.written = 0

    def add(self, phone: str, launch: str, change: DeploymentChange) -> bool:
        """Hold one change; True when enough are held to write them."""
        self._pending[phone] = StatusRow(
            phone,
            launch,
            change.deployment.conversation_id or None,
            change.current.value,
            change.observed_at.timestamp(),
        )
        return len(self._pending) >= FLUSH_ROWS

    async def flush(self, final: Sequence[str] = ()) -> None:
        async with self._lock:
            rows, self._pending = list(self._pending.values()), {}
            await self._ledger.record_statuses(self._run, rows, final=final)
            self.written += len(rows)


async def _accepted_launches(
    ledger: Ledger, run: str
) -> tuple[list[CampaignAck], dict[str, list[str]]]:
    """The run's accepted launches not yet final, and each one's phones."""
    final = await ledger.final_launches(run)
    acks = []
    for _, _, state, ack, _ in await ledger.claims(run):
        if state == ACCEPTED and ack:
            launch = CampaignAck(**orjson.loads(ack))
            if launch.launch_request_id not in final:
                acks.append(launch)
    phones: dict[str, list[str]] = {ack.launch_request_id: [] for ack in acks}
    if acks:
        async for record in ledger.records(run, [ACCEPTED]):
            if record.launch_request_id in phones:
                phones[record.launch_request_id].append(record.phone)
    return acks, phones


async def follow_launches(
    source: StatusSource,
    ledger: Ledger | None,
    run: str,
    acks: Sequence[CampaignAck],
    phones: dict[str, list[str]],
    options: TrackOptions,
    concurrency: int,
) -> int:
    """Track ``acks`` until they settle, writing the outcomes into ``ledger``
    (with None, only consume the changes: the benchmark's baseline); the
    number of changes read."""
    queue: asyncio.Queue[CampaignAck] = asyncio.Queue()
    for ack in acks:
        queue.put_nowait(ack)
    writer = None if ledger is None else _Writer(ledger, run)
    changes = 0

    async def follow_one(ack: CampaignAck) -> None:
        nonlocal changes
        launch = ack.launch_request_id
        recipients = LaunchPhones(phones.get(launch, ()))
        unmatched = 0
        tracker = CampaignTracker(source, ack, options)
        try:
            async for change in tracker:
                changes += 1
                if writer is None:
                    continue
                phone = recipients.phone_of(change.deployment.cellphone)
                if phone is None:
                    unmatched += 1
                elif writer.add(phone, launch, change):
                    await writer.flush()
        finally:
            await tracker.aclose()
        if unmatched:
            log.warning(
                "follow: %d status change(s) of launch %s matched no recipient of run %s",
                unmatched,
                launch,
                run,
            )
        if writer is not None:
            # A launch with deployments only SUCCESS (sent, delivery not yet
            # confirmed) is settled but not final: following again polls it.
            done = all(status is not None and status.is_final for status in tracker.held_counts())
            await writer.flush(final=[launch] if done else ())

    async def work() -> None:
        while not queue.empty():
            await follow_one(queue.get_nowait())

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, len(acks))):
                group.create_task(work())
    finally:
        if writer is not None:
            await asyncio.shield(writer.flush())  # what was read is kept, even on a cancel
    return changes


async def follow_run(
    client: BulkClient,
    journal: Journal,
    run: str,
    *,
    concurrency: int = DEFAULT_FOLLOW_CONCURRENCY,
    poll_interval: float = 1.0,
    max_interval: float = 30.0,
    timeout: float | None = None,
) -> Funnel:
    """Track every accepted launch of ``run`` until it settles, write each
    recipient's outcome into the ledger, and return the run's :class:`Funnel`.

    ``journal`` is the run's ledger (an SQLite path, a ``postgresql://`` DSN
    or a ledger object, left open for its owner). ``concurrency`` launches
    are tracked at once; ``poll_interval``, ``max_interval`` and ``timeout``
    (per launch) are those of :meth:`CampaignClient.track`. A launch is
    settled once no deployment is in progress; ``SUCCESS`` (sent, delivery
    not confirmed yet) is settled but not final. Launches whose every
    deployment is final are not tracked again, so calling it again resumes
    where it stopped (after an interruption), and learns which ``SUCCESS``
    became ``DELIVERED`` (one poll per such launch).
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValidationError([("concurrency", f"must be an int >= 1, got {concurrency!r}")])
    options = TrackOptions("settled", poll_interval, max_interval, timeout)
    ledger = ledger_from(journal)
    owned = ledger is not journal
    try:
        await ledger.open()
        if await ledger.run_info(run) is None:
            raise LedgerError(f"this ledger has no run {run!r}")
        await follow_open(client, ledger, run, options, concurrency)
        return await ledger.funnel(run)
    finally:
        if owned:
            await ledger.aclose()


async def follow_open(
    client: BulkClient, ledger: Ledger, run: str, options: TrackOptions, concurrency: int
) -> None:
    """Follow the run's launches not yet final, in an open ledger."""
    acks, phones = await _accepted_launches(ledger, run)
    await follow_launches(client.transport, ledger, run, acks, phones, options, concurrency)
