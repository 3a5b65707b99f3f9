"""Following a run: track every accepted launch of a run until it settles and
write its recipients' outcomes into the run's ledger.

Launches are tracked ``concurrency`` at a time (one tracker each) until
they settle (every deployment out of progress). A launch whose every
deployment is final (delivered or failed) is marked so in the same
transaction as its last statuses, and is never tracked again; following
again (after an interruption, or later to learn which ``SUCCESS`` became
``DELIVERED``) tracks only the others. Statuses are written in bulk: the
latest one per deployment of a launch since its last write, every
``FLUSH_ROWS`` deployments or ``FLUSH_SECONDS``, and at the end of the launch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Container, Iterable, Sequence
from typing import Final

import orjson

from .._funnel import Funnel
from .._redaction import sdk_logger
from .._words import counted
from ..config import is_positive_seconds
from ..errors import CampaignKitError, LedgerError, ValidationError
from ..ledger import ACCEPTED, ClaimRow, Journal, Ledger, ledger_from
from ..models import CampaignAck
from ..tracker import CampaignTracker, StatusSource, TrackOptions
from ._outcome_writer import LaunchOutcomes, OutcomeWriter
from ._seam import BulkClient

log = sdk_logger("campaignkit.bulk")

FLUSH_ROWS: Final = 5000
"""Deployments of a launch whose changes are held before they are written
(and at the end of the launch)."""
FLUSH_SECONDS: Final = 2.0
"""The longest a launch's changes are held before they are written: what
judges the outcomes while the run sends (the breaker, a canary) sees a
launch that has not settled yet."""
DEFAULT_FOLLOW_CONCURRENCY: Final = 8
"""Launches tracked at once."""


async def accepted_launches(
    ledger: Ledger, run: str
) -> tuple[list[CampaignAck], dict[str, list[str]]]:
    """The run's accepted launches not yet final, and each one's phones."""
    acks = unfinished_launches(await ledger.claims(run), await ledger.final_launches(run))
    return list(acks.values()), await ledger.launch_phones(run, acks.keys())


def unfinished_launches(
    claims: Iterable[ClaimRow], final: Container[str], seen: Container[str] = ()
) -> dict[str, CampaignAck]:
    """The launches of ``claims`` accepted, not ``final``, by launch id; a
    claim in ``seen`` is passed over."""
    acks: dict[str, CampaignAck] = {}
    for claim, _, state, ack, _ in claims:
        if state == ACCEPTED and ack and claim not in seen:
            launch = CampaignAck(**orjson.loads(ack))
            if launch.launch_request_id not in final:
                acks.setdefault(launch.launch_request_id, launch)
    return acks


class Following:
    """Launches tracked ``concurrency`` at a time as they are given
    (:meth:`add`), their recipients' outcomes written into ``ledger`` (with
    None, only consumed: the benchmark's baseline), until :meth:`close` and
    every launch given has settled: :meth:`run`.

    A launch whose tracking fails (after the tracker's own retries: a
    launch the service no longer knows, a timeout) does not stop the
    others: once they are followed, the first such error is raised, with
    the count. The ``follow_timeout`` given to :meth:`close` counts from
    then: following stops once it has passed, the launches under way write
    what was read (not marked final), and the count of launches left is
    logged. A send follows its launches as they are accepted, so whatever
    the outcomes judge (a breaker, a canary) acts while it still sends.
    """

    def __init__(
        self,
        source: StatusSource,
        ledger: Ledger | None,
        run: str,
        options: TrackOptions,
        concurrency: int,
    ) -> None:
        self._source, self._ledger, self._run = source, ledger, run
        self._options, self._concurrency = options, concurrency
        self._queue: asyncio.Queue[tuple[CampaignAck, Sequence[str] | None] | None]
        self._queue = asyncio.Queue()
        self._writer = None if ledger is None else OutcomeWriter(ledger, run)
        self._failures: list[CampaignKitError] = []
        self._given: set[str] = set()
        """The launches given, each followed once however often it is given."""
        self._ended = 0  # launches followed to their end, or given up
        self._ends_at: float | None = None
        self._deadline: asyncio.Timeout | None = None
        self._follow_timeout: float | None = None
        self.written = asyncio.Event()
        """Set each time outcomes are written (cleared by whoever waits for them)."""

    def add(self, ack: CampaignAck, phones: Sequence[str] | None = None) -> None:
        """Follow ``ack`` (``phones``: its recipients', else read from the
        ledger), unless it was given before."""
        if ack.launch_request_id in self._given:
            return
        self._given.add(ack.launch_request_id)
        self._queue.put_nowait((ack, phones))

    async def add_accepted(self, ledger: Ledger) -> int:
        """Follow the run's accepted launches not yet final, read in
        ``ledger``; how many there are (given before or not)."""
        acks, phones = await accepted_launches(ledger, self._run)
        for ack in acks:
            self.add(ack, phones.get(ack.launch_request_id, ()))
        return len(acks)

    def close(self, follow_timeout: float | None = None) -> None:
        """No more launches: :meth:`run` returns once those given have
        settled, or ``follow_timeout`` seconds from now."""
        for _ in range(self._concurrency):
            self._queue.put_nowait(None)
        self._follow_timeout = follow_timeout
        if follow_timeout is not None:
            self._ends_at = asyncio.get_running_loop().time() + follow_timeout
            if self._deadline is not None:
                self._deadline.reschedule(self._ends_at)

    async def run(self) -> None:
        """Follow until closed and done (see the class)."""
        deadline = self._deadline = asyncio.timeout_at(self._ends_at)
        try:
            async with deadline:
                try:
                    async with asyncio.TaskGroup() as group:
                        for _ in range(self._concurrency):
                            group.create_task(self._work())
                except BaseExceptionGroup as failed:
                    # The ledger's error itself (what callers catch), not a group.
                    first, *others = failed.exceptions
                    for other in others:
                        first.add_note(f"follow: failed at the same time: {other!r}")
                    raise first from None
        except TimeoutError:
            if not deadline.expired():
                raise
            log.warning(
                "follow: stopped after %g s (follow_timeout) with %d of %s of run %r "
                "not yet settled; what was read is written, and following again resumes",
                self._follow_timeout,
                len(self._given) - self._ended,
                counted(len(self._given), "launch"),
                self._run,
            )
        if self._failures:
            first = self._failures[0]
            first.add_note(
                f"follow: {len(self._failures)} of {counted(len(self._given), 'launch')} of run "
                f"{self._run!r} could not be followed; the others were (following again "
                "retries those)"
            )
            raise first

    async def _work(self) -> None:
        run = self._run
        while (item := await self._queue.get()) is not None:
            ack, phones = item
            launch = ack.launch_request_id
            tracker = CampaignTracker(self._source, ack, self._options)
            try:
                if self._writer is None or self._ledger is None:
                    async for _ in tracker:
                        pass
                else:
                    if phones is None:
                        phones = (await self._ledger.launch_phones(run, [launch]))[launch]
                    outcomes = LaunchOutcomes(self._writer, launch, phones)
                    await self._follow_one(tracker, outcomes)
                    if outcomes.unmatched:
                        log.warning(
                            "follow: %s of launch %s matched no recipient of run %s",
                            counted(outcomes.unmatched, "deployment"),
                            launch,
                            run,
                        )
            except CampaignKitError as exc:
                if isinstance(exc, LedgerError):
                    raise  # the ledger's trouble is every launch's
                log.warning(
                    "follow: launch %s of run %s could not be followed: %s", launch, run, exc
                )
                self._failures.append(exc)
            finally:
                await tracker.aclose()
            self._ended += 1

    async def _follow_one(self, tracker: CampaignTracker, outcomes: LaunchOutcomes) -> None:
        completed = False
        changed = tracker.collect_changed()
        flushed = time.time()
        try:
            while await tracker.advance():
                now = time.time()
                if changed:
                    outcomes.add(changed, now)
                    changed.clear()
                held = len(outcomes.latest)
                if held and (held >= FLUSH_ROWS or now - flushed >= FLUSH_SECONDS):
                    await outcomes.write()
                    flushed = now
                    self.written.set()
            completed = True
        finally:
            # A launch left at SUCCESS (sent, delivery not yet confirmed) is
            # settled but not final: following again polls it once more.
            final = completed and all(
                status is not None and status.is_final for status in tracker.held_counts()
            )
            # What was read is kept, even when cancelled (the deadline, an
            # interrupt): written before the cancellation goes on. Cancelled
            # again meanwhile, the write is cancelled too.
            written = asyncio.ensure_future(outcomes.write(final=final))
            try:
                await asyncio.shield(written)
            except asyncio.CancelledError:
                await written
                raise
            self.written.set()


async def logging_failures(following: Following) -> None:
    """Run ``following``; a launch that cannot be followed is logged, not
    raised (the send took place, and ``follow_run`` retries it later), the
    ledger's failure is raised."""
    try:
        await following.run()
    except LedgerError:
        raise
    except CampaignKitError as exc:
        log.warning("follow: %s (%s)", exc, "; ".join(getattr(exc, "__notes__", ())))


async def follow_launches(
    source: StatusSource,
    ledger: Ledger | None,
    run: str,
    acks: Sequence[CampaignAck],
    phones: dict[str, list[str]],
    options: TrackOptions,
    concurrency: int,
    follow_timeout: float | None = None,
) -> None:
    """Track ``acks`` until they settle, writing the outcomes into ``ledger``
    (with None, only consume the changes), at most ``follow_timeout``
    seconds: :class:`Following` of launches known at once."""
    following = Following(source, ledger, run, options, min(concurrency, len(acks)))
    for ack in acks:
        following.add(ack, phones.get(ack.launch_request_id, ()))
    following.close(follow_timeout)
    await following.run()


def follow_timeout_problems(follow_timeout: object) -> list[tuple[str, str]]:
    """What is wrong with a ``follow_timeout``: None or a positive number of seconds."""
    if follow_timeout is None or is_positive_seconds(follow_timeout):
        return []
    return [
        ("follow_timeout", f"must be a positive number of seconds or None, got {follow_timeout!r}")
    ]


def follow_problems(follow: object, follow_timeout: object) -> list[tuple[str, str]]:
    """What is wrong with ``follow`` (True or False) and ``follow_timeout``,
    as a send and a wait for the workers take them."""
    problems = (
        [] if isinstance(follow, bool) else [("follow", f"must be True or False, got {follow!r}")]
    )
    return problems + follow_timeout_problems(follow_timeout)


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
    follow_timeout: float | None = None,
) -> Funnel:
    """Track every accepted launch of ``run`` until it settles, write each
    recipient's outcome into the ledger, and return the run's :class:`Funnel`.

    ``journal`` is the run's ledger (an SQLite path, a ``postgresql://`` DSN
    or a ledger object, left open for its owner; a path or DSN of no ledger is
    :class:`~campaignkit.ledger.LedgerNotFound`, and nothing is created). ``concurrency`` launches
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

    ``follow_timeout``: at most that many seconds of following in all (None:
    until every launch settles). Then it stops and returns the funnel as
    written: the launches under way keep the statuses read so far, those
    not settled are logged (a warning of ``campaignkit.bulk``), and calling
    it again resumes with them.
    """
    problems = []
    if not isinstance(run, str) or not run.strip():
        problems.append(("run", f"must be a non-empty string, got {run!r}"))
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        problems.append(("concurrency", f"must be an int >= 1, got {concurrency!r}"))
    problems += follow_timeout_problems(follow_timeout)
    if problems:
        raise ValidationError(problems)
    options = TrackOptions("settled", poll_interval, max_interval, timeout, not_found_grace)
    ledger = ledger_from(journal, create=False)  # following reads a run: never a new ledger
    owned = ledger is not journal
    try:
        await ledger.open()
        if await ledger.run_info(run) is None:
            raise LedgerError(f"this ledger has no run {run!r}")
        await follow_open(client, ledger, run, options, concurrency, follow_timeout)
        return await ledger.funnel(run)
    finally:
        if owned:
            await ledger.aclose()


async def follow_open(
    client: BulkClient,
    ledger: Ledger,
    run: str,
    options: TrackOptions,
    concurrency: int,
    follow_timeout: float | None = None,
) -> None:
    """Follow the run's launches not yet final, in an open ledger."""
    acks, phones = await accepted_launches(ledger, run)
    await follow_launches(
        client.transport, ledger, run, acks, phones, options, concurrency, follow_timeout
    )
