"""Following a run: track every accepted launch of a run until it settles and
write its recipients' outcomes into the run's ledger.

Launches are tracked ``concurrency`` at a time (one tracker each) until
they settle (every deployment out of progress). A launch whose every
deployment is final (delivered or failed) is marked so in the same
transaction as its last statuses, and is never tracked again; following
again (after an interruption, or later to learn which ``SUCCESS`` became
``DELIVERED``) tracks only the others. Statuses are written in bulk: the
latest one per deployment of a launch since its last write, every
``FLUSH_ROWS`` deployments and at the end of the launch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter
from typing import Final

import orjson

from .._funnel import Funnel
from .._redaction import sdk_logger
from .._wire.decode import StatusEntry
from ..errors import CampaignKitError, LedgerError, ValidationError
from ..ledger import ACCEPTED, Journal, Ledger, StatusRow, ledger_from
from ..models import CampaignAck
from ..status import KNOWN_WIRE_STATUSES
from ..tracker import CampaignTracker, StatusSource, TrackOptions
from ._launch_phones import LaunchPhones
from ._seam import BulkClient

log = sdk_logger("campaignkit.bulk")

FLUSH_ROWS: Final = 5000
"""Deployments of a launch whose changes are held before they are written
(and at the end of the launch)."""
DEFAULT_FOLLOW_CONCURRENCY: Final = 8
"""Launches tracked at once."""

_CELLPHONE = attrgetter("cellphone")
_WIRE_VALUES: Final = {
    spelling: status.value for spelling, status in KNOWN_WIRE_STATUSES.items() if status
}
"""The value kept for each spelling of a known status (an unknown one is kept as read)."""


class _Writer:
    """Writes the launches' outcomes, grouping the writes that wait on one
    another into one transaction (a durable ledger commits each to disk):
    whoever takes the turn writes every row handed in by then."""

    def __init__(self, ledger: Ledger, run: str) -> None:
        self._ledger = ledger
        self._run = run
        self._turn = asyncio.Lock()
        self._open: _Group | None = None

    async def write(self, rows: Sequence[StatusRow], final: Sequence[str]) -> None:
        """Return once ``rows`` are written (``final`` launches marked with them)."""
        group = self._open = self._open or _Group()
        group.rows += rows
        group.final += final
        async with self._turn:
            if group is self._open:  # not written yet: ours to write
                self._open = None
                try:
                    await self._ledger.record_statuses(self._run, group.rows, final=group.final)
                except BaseException as exc:
                    group.failure = exc
                    raise
            elif group.failure is not None:
                raise LedgerError(
                    f"the outcomes of run {self._run!r} could not be written"
                ) from group.failure


class _Group:
    __slots__ = ("failure", "final", "rows")

    def __init__(self) -> None:
        self.rows: list[StatusRow] = []
        self.final: list[str] = []
        self.failure: BaseException | None = None


class _LaunchOutcomes:
    """One launch being followed: the latest entry of each of its
    deployments (by cellphone) since the last write, with when it was seen,
    each matched to its recipient when written."""

    def __init__(self, writer: _Writer, launch: str, phones: Sequence[str]) -> None:
        self._writer = writer
        self._launch = launch
        self._recipients = LaunchPhones(phones)
        self.latest: dict[str | None, tuple[StatusEntry, float]] = {}
        """By cellphone: the entry (its status the new one, as on the wire)
        and when it was seen; the entries are not tracked by the garbage
        collector, so holding them costs it nothing."""
        self.unmatched = 0

    def add(self, entries: list[StatusEntry], seen: float) -> None:
        """Hold the changed ``entries`` of a poll made at ``seen``."""
        # In C, a change costing a tuple (benchmarks row 15: 300,000 of them).
        self.latest.update(
            zip(map(_CELLPHONE, entries), zip(entries, repeat(seen), strict=False), strict=True)
        )

    async def write(self, *, final: bool = False) -> None:
        """Write the changes held (and, with ``final``, mark the launch final)."""
        latest, self.latest = self.latest, {}
        launch = self._launch
        rows = [
            StatusRow(
                phone,
                launch,
                entry.conversation_id or None,
                _WIRE_VALUES.get(entry.status) or str(entry.status),
                seen,
            )
            for phone, (entry, seen) in zip(
                self._recipients.phones_of(latest), latest.values(), strict=True
            )
            if phone is not None
        ]
        self.unmatched += len(latest) - len(rows)
        await self._writer.write(rows, [launch] if final else ())


async def _accepted_launches(
    ledger: Ledger, run: str
) -> tuple[list[CampaignAck], dict[str, list[str]]]:
    """The run's accepted launches not yet final, and each one's phones."""
    final = await ledger.final_launches(run)
    acks: dict[str, CampaignAck] = {}
    for _, _, state, ack, _ in await ledger.claims(run):
        if state == ACCEPTED and ack:
            launch = CampaignAck(**orjson.loads(ack))
            if launch.launch_request_id not in final:
                acks.setdefault(launch.launch_request_id, launch)
    return list(acks.values()), await ledger.launch_phones(run, acks.keys())


async def follow_launches(
    source: StatusSource,
    ledger: Ledger | None,
    run: str,
    acks: Sequence[CampaignAck],
    phones: dict[str, list[str]],
    options: TrackOptions,
    concurrency: int,
) -> None:
    """Track ``acks`` until they settle, writing the outcomes into ``ledger``
    (with None, only consume the changes: the benchmark's baseline).

    A launch whose tracking fails (after the tracker's own retries: a
    launch the service no longer knows, a timeout) does not stop the
    others: once they are followed, the first such error is raised, with
    the count.
    """
    queue: asyncio.Queue[CampaignAck] = asyncio.Queue()
    for ack in acks:
        queue.put_nowait(ack)
    writer = None if ledger is None else _Writer(ledger, run)
    failures: list[CampaignKitError] = []

    async def consume(tracker: CampaignTracker) -> None:
        async for _ in tracker:
            pass

    async def follow_one(tracker: CampaignTracker, outcomes: _LaunchOutcomes) -> None:
        completed = False
        changed = tracker.collect_changed()
        try:
            while await tracker.advance():
                if changed:
                    outcomes.add(changed, time.time())
                    changed.clear()
                    if len(outcomes.latest) >= FLUSH_ROWS:
                        await outcomes.write()
            completed = True
        finally:
            # A launch left at SUCCESS (sent, delivery not yet confirmed) is
            # settled but not final: following again polls it once more.
            final = completed and all(
                status is not None and status.is_final for status in tracker.held_counts()
            )
            # What was read is kept, even when cancelled.
            await asyncio.shield(outcomes.write(final=final))

    async def work() -> None:
        while not queue.empty():
            ack = queue.get_nowait()
            launch = ack.launch_request_id
            tracker = CampaignTracker(source, ack, options)
            try:
                if writer is None:
                    await consume(tracker)
                    continue
                outcomes = _LaunchOutcomes(writer, launch, phones.get(launch, ()))
                await follow_one(tracker, outcomes)
            except CampaignKitError as exc:
                if isinstance(exc, LedgerError):
                    raise  # the ledger's trouble is every launch's
                log.warning(
                    "follow: launch %s of run %s could not be followed: %s", launch, run, exc
                )
                failures.append(exc)
                continue
            finally:
                await tracker.aclose()
            if outcomes.unmatched:
                log.warning(
                    "follow: %d deployment(s) of launch %s matched no recipient of run %s",
                    outcomes.unmatched,
                    launch,
                    run,
                )

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(acks))):
            group.create_task(work())
    if failures:
        first = failures[0]
        first.add_note(
            f"follow: {len(failures)} of {len(acks)} launch(es) of run {run!r} could not be "
            "followed; the others were (following again retries those)"
        )
        raise first


async def follow_run(
    client: BulkClient,
    journal: Journal,
    run: str,
    *,
    concurrency: int = DEFAULT_FOLLOW_CONCURRENCY,
    poll_interval: float = 1.0,
    max_interval: float = 30.0,
    timeout: float | None = None,
    not_found_grace: float = 30.0,
) -> Funnel:
    """Track every accepted launch of ``run`` until it settles, write each
    recipient's outcome into the ledger, and return the run's :class:`Funnel`.

    ``journal`` is the run's ledger (an SQLite path, a ``postgresql://`` DSN
    or a ledger object, left open for its owner). ``concurrency`` launches
    are tracked at once; ``poll_interval``, ``max_interval``, ``timeout``
    (per launch) and ``not_found_grace`` are those of
    :meth:`CampaignClient.track`. A launch that cannot be followed (the
    service no longer knows it, a timeout) does not stop the others: its
    error is raised once they are followed. A launch is
    settled once no deployment is in progress; ``SUCCESS`` (sent, delivery
    not confirmed yet) is settled but not final. Launches whose every
    deployment is final are not tracked again, so calling it again resumes
    where it stopped (after an interruption), and learns which ``SUCCESS``
    became ``DELIVERED`` (one poll per such launch).
    """
    problems = []
    if not isinstance(run, str) or not run.strip():
        problems.append(("run", f"must be a non-empty string, got {run!r}"))
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        problems.append(("concurrency", f"must be an int >= 1, got {concurrency!r}"))
    if problems:
        raise ValidationError(problems)
    options = TrackOptions("settled", poll_interval, max_interval, timeout, not_found_grace)
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


async def follow_sent(client: BulkClient, ledger: Ledger, run: str) -> None:
    """``send_bulk(follow=True)``'s follow, in an open ledger: a launch that
    cannot be followed is logged, not raised (the send took place: its
    report is what the caller needs; ``follow_run`` later retries it)."""
    options = TrackOptions("settled")
    try:
        await follow_open(client, ledger, run, options, DEFAULT_FOLLOW_CONCURRENCY)
    except LedgerError:
        raise
    except CampaignKitError as exc:
        log.warning("follow: %s (%s)", exc, "; ".join(getattr(exc, "__notes__", ())))


async def follow_open(
    client: BulkClient, ledger: Ledger, run: str, options: TrackOptions, concurrency: int
) -> None:
    """Follow the run's launches not yet final, in an open ledger."""
    acks, phones = await _accepted_launches(ledger, run)
    await follow_launches(client.transport, ledger, run, acks, phones, options, concurrency)
