"""Watching a run while it sends: its accepted launches followed as soon as
their chunks are settled, so that what the outcomes judge acts while the run
still sends (the ledger's breaker pauses it where the statuses are written:
no claim takes anything more, the producer hands nothing more over), and
the canary's gate, which holds the rest of the input back until the first
recipients' outcomes say it may go.

The canary's state is the run's own, kept by the ledger: its first ``size``
recipients are those sent first (accepted, rejected or ambiguous); while
they are judged the run is paused (reason ``canary``, detail
:data:`JUDGING`...), so an interrupted judgement is taken up again by the
run's next send, its wait counted from that pause. Once judged, the pause is
lifted (the shares held) or replaced by the figures that failed, and a run
holding ``size`` sent recipients, resumed or not, is never gated again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any, Final

import orjson

from .._guards import Canary, Verdict
from .._redaction import sdk_logger
from ..errors import CampaignKitError, LedgerError
from ..ledger import ACCEPTED, AMBIGUOUS, CANARY, REJECTED, Ledger, RunInfo, RunPause
from ..models import CampaignAck
from ..tracker import TrackOptions
from ._follow import DEFAULT_FOLLOW_CONCURRENCY, FLUSH_SECONDS, Following, accepted_launches
from ._options import BulkOptions
from ._pipeline import Handed, HandOver, Sent
from ._planner import Planner
from ._seam import BulkClient

log = sdk_logger("campaignkit.bulk")

JUDGING: Final = "judging its first"
"""How the detail of the pause of a run whose canary is being judged begins."""
_RECHECK: Final = 5.0
"""Seconds at most between two judgements of a canary (and at each write)."""


class Watch:
    """The following and the canary of one ``send_bulk``: launches given by
    :meth:`sent` are followed (every one with ``follow``, the canary's
    otherwise), chunks handed over through :meth:`gate` wait for the
    canary's verdict, and :meth:`during` runs the send with them."""

    def __init__(
        self,
        client: BulkClient,
        ledger: Ledger,
        run: str,
        options: BulkOptions,
        planner: Planner,
    ) -> None:
        self._ledger, self._run, self._options = ledger, run, options
        self._planner = planner
        self._following = Following(
            client.transport, ledger, run, TrackOptions("settled"), DEFAULT_FOLLOW_CONCURRENCY
        )
        self._canary = options.canary
        self._gated = self._canary is not None
        """Chunks handed over wait for the canary's verdict."""
        self._left = 0
        """Canary recipients still to hand over."""
        self._pending: set[str] = set()
        """The canary's chunks handed over and not settled yet."""
        self._settled = asyncio.Event()

    @classmethod
    def of(
        cls, client: BulkClient, ledger: Ledger, run: str, options: BulkOptions, planner: Planner
    ) -> Watch | None:
        """The send's watch, if it follows or has a canary."""
        if not options.follow and options.canary is None:
            return None
        return cls(client, ledger, run, options, planner)

    async def during(self, send: Coroutine[Any, Any, None]) -> None:
        """Run ``send`` (the send's pipeline) while following; once it has
        ended, follow for at most ``follow_timeout`` seconds more with
        ``follow`` (the canary's following ends with the send otherwise)."""
        try:
            async with asyncio.TaskGroup() as group:
                following = group.create_task(self._follow())
                try:
                    await self._start()
                    await send
                except BaseException:
                    following.cancel()
                    raise
                if self._options.follow:
                    self._following.close(self._options.follow_timeout)
                else:
                    following.cancel()
        except BaseExceptionGroup as failed:
            # The error itself (what callers catch), not a group.
            first, *others = failed.exceptions
            for other in others:
                first.add_note(f"send_bulk: failed at the same time: {other!r}")
            raise first from None

    async def _follow(self) -> None:
        """Follow the launches given; with ``follow``, first the run's
        earlier launches not yet final."""
        if self._options.follow:
            acks, phones = await accepted_launches(self._ledger, self._run)
            for ack in acks:
                self._following.add(ack, phones.get(ack.launch_request_id, ()))
        await _logging_failures(self._following)

    def sent(self, chunk: str, sent: Sent | None) -> None:
        """``chunk`` was sent (``sent``) or found nothing to claim (None)."""
        result = None if sent is None else sent.result
        followed = self._options.follow or chunk in self._pending
        if followed and result is not None and result.outcome == "accepted" and result.ack:
            self._following.add(result.ack)
        self._pending.discard(chunk)
        if not self._pending:
            self._settled.set()

    # -- the canary

    async def _start(self) -> None:
        """Take the canary up where the run left it: judged already (the
        gate is open), being judged when a send stopped (judged now), or
        with some of its recipients still to send."""
        canary = self._canary
        if canary is None:
            return
        if (pause := judging(await self._ledger.run_info(self._run))) is not None:
            acks, phones = await accepted_launches(self._ledger, self._run)
            for ack in acks:
                self._following.add(ack, phones.get(ack.launch_request_id, ()))
            if acks:  # their statuses read once, however long ago the wait began
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._following.written.wait(), FLUSH_SECONDS * 2)
            await self._judge(canary, pause.paused_at)
        elif (left := canary.size - await self._sent()) > 0:
            self._hold(left)
        else:
            self._open()

    def gate(self, hand_over: HandOver) -> HandOver:
        """``hand_over`` behind the canary's gate."""

        async def gated(handed: Handed) -> object:
            canary = self._canary
            if not self._gated or canary is None:
                return await hand_over(handed)
            self._pending.add(handed.chunk)
            self._settled.clear()
            handed_over = await hand_over(handed)
            self._left -= len(handed.planned.phones) - len(handed.held)
            if self._left > 0:
                self._hold(self._left)
                return handed_over
            await self._settled.wait()
            # Claims may have taken fewer than were planned (a cool-down,
            # the daily limit): the canary goes on until it has its size.
            if (left := canary.size - await self._sent()) > 0:
                self._hold(left)
            else:
                await self._judge(canary, time.time(), sent_now=True)
            return handed_over

        return gated

    def _hold(self, left: int) -> None:
        """``left`` canary recipients to go: no chunk planned larger."""
        self._left = left
        self._planner.chunk_size = min(self._options.chunk_size, left)

    def _open(self) -> None:
        self._gated = False
        self._planner.chunk_size = self._options.chunk_size

    async def _sent(self) -> int:
        counts = await self._ledger.counts(self._run)
        return counts[ACCEPTED] + counts[REJECTED] + counts[AMBIGUOUS]

    async def _judge(self, canary: Canary, since: float, *, sent_now: bool = False) -> None:
        """Pause the run while the canary, sent at ``since``, is judged; then
        resume it if the shares hold, or pause it with the figures that failed."""
        ledger, run = self._ledger, self._run
        if sent_now:
            sent = time.strftime("%H:%M:%S UTC", time.gmtime(since))
            detail = (
                f"{JUDGING} {canary.size} recipients (sent at {sent}): the rest is sent once "
                f"their outcomes hold, within {canary.wait}"
            )
            if not await ledger.pause_run(run, CANARY, detail):
                self._open()  # paused meanwhile (a guard, a person): theirs to resume
                return
        written = self._following.written
        while judging(await ledger.run_info(run)) is not None:
            written.clear()
            funnel = await ledger.funnel(run)
            waited = timedelta(seconds=time.time() - since)
            judgement = canary.judge(
                funnel.accepted, funnel.delivered, sum(funnel.failed.values()), waited=waited
            )
            if judgement.verdict is Verdict.WAIT:
                left = (canary.wait - waited).total_seconds()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(written.wait(), max(0.0, min(left, _RECHECK)))
                continue
            await ledger.resume_run(run)
            if judgement.verdict is Verdict.PAUSE:
                await ledger.pause_run(run, CANARY, judgement.detail)
            else:
                log.info("run %s: its canary held (%s): sending the rest", run, judgement.detail)
            break
        # Resumed by a person meanwhile, the rest goes without the verdict.
        self._open()


class FollowingRun:
    """Following a run that others send (the workers), in an ``async with``
    block: the launches its senders accepted, read from the ledger at each
    :meth:`feed`, followed as they come, so that the run's breaker pauses it
    while the workers still send; at the block's end, those fed are
    followed until settled (at most ``follow_timeout`` seconds more)."""

    def __init__(
        self,
        client: BulkClient,
        ledger: Ledger,
        run: str,
        *,
        follow_timeout: float | None = None,
    ) -> None:
        self._ledger, self._run, self._follow_timeout = ledger, run, follow_timeout
        self._following = Following(
            client.transport, ledger, run, TrackOptions("settled"), DEFAULT_FOLLOW_CONCURRENCY
        )
        self._claims: set[str] = set()
        """The claims whose launch is followed (or was final already)."""
        self._final: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FollowingRun:
        self._final = await self._ledger.final_launches(self._run)
        self._task = asyncio.create_task(_logging_failures(self._following))
        return self

    async def feed(self) -> None:
        """Follow the launches accepted since the last feed."""
        for claim, _, state, ack, _ in await self._ledger.claims(self._run):
            if state != ACCEPTED or not ack or claim in self._claims:
                continue
            self._claims.add(claim)
            launch = CampaignAck(**orjson.loads(ack))
            if launch.launch_request_id not in self._final:
                self._following.add(launch)

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        task = self._task
        assert task is not None
        try:
            if exc_type is None:
                await self.feed()
                self._following.close(self._follow_timeout)
                await asyncio.wait([task])
        finally:
            if not task.done():  # interrupted: what was read is written first
                task.cancel()
                await asyncio.wait([task])
        if exc_type is None:
            task.result()


async def _logging_failures(following: Following) -> None:
    """Run ``following``; a launch that cannot be followed is logged, not
    raised (the send took place, and ``follow_run`` retries it later), the
    ledger's failure is raised."""
    try:
        await following.run()
    except LedgerError:
        raise
    except CampaignKitError as exc:
        log.warning("follow: %s (%s)", exc, "; ".join(getattr(exc, "__notes__", ())))


def judging(info: RunInfo | None) -> RunPause | None:
    """The run's pause while its canary is judged, if it is."""
    pause = None if info is None else info.paused
    if pause is not None and pause.reason == CANARY and pause.detail.startswith(JUDGING):
        return pause
    return None
