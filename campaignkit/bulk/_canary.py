"""The canary's gate, the one for every send of a run (``send_bulk`` in one
process, the workers' ``submit``): it holds the rest of the input back
until the first recipients' outcomes say it may go.

The canary's state is the run's own, kept by the ledger: its first ``size``
recipients are those sent first (accepted, rejected or ambiguous); while
they are judged the run is paused (reason ``canary``, detail
:data:`JUDGING`...), so that no worker claims anything more of it and an
interrupted judgement is taken up again by the run's next send, its wait
counted from that pause. Once judged, the pause is lifted (the shares held)
or replaced by the figures that failed. The ledger records the judgement
with that first pause (:meth:`~campaignkit.ledger.Ledger.judge_canary`): a
run so recorded, resumed or not, is never gated again, and one holding
``size`` sent recipients never judged (its send stopped between the last
of them and the pause) is judged by its next send.

What differs between the two sends is only how the gate learns that the
canary's chunks were sent (:class:`Settling`): from the senders of its own
process, or from the ledger, where the workers settle them
(:class:`SettledInLedger`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Final, Protocol

from .._guards import Canary, Verdict
from .._redaction import sdk_logger
from ..ledger import (
    ACCEPTED,
    AMBIGUOUS,
    CANARY,
    IN_FLIGHT,
    PLANNED,
    REJECTED,
    Ledger,
    RunInfo,
    RunPause,
)
from ..tracker import TrackOptions
from ._follow import (
    DEFAULT_FOLLOW_CONCURRENCY,
    FLUSH_SECONDS,
    Following,
    logging_failures,
)
from ._pipeline import Handed, HandOver
from ._planner import Planner
from ._seam import BulkClient

log = sdk_logger("campaignkit.bulk")

JUDGING: Final = "judging its first"
"""How the detail of the pause of a run whose canary is being judged begins."""
_RECHECK: Final = 5.0
"""Seconds at most between two judgements of a canary (and at each write)."""
SETTLED_POLL: Final = 0.2
"""Seconds between two readings of the ledger while the workers send the canary."""


class Settling(Protocol):
    """How a gate learns that the canary's chunks it handed over were sent."""

    def handing(self, handed: Handed) -> None:
        """``handed``, a chunk of the canary, is being handed over."""

    async def settled(self) -> None:
        """Wait until the canary's chunks handed over are settled (or never
        will be: the run was paused meanwhile), their accepted launches
        followed."""


class CanaryGate:
    """The canary of one send of ``run``: :meth:`start` takes it up where
    the run left it, and chunks handed over through :meth:`gate` wait for
    its verdict. While it is sent, ``planner`` plans no chunk larger than
    what is left of it; ``following`` follows its launches (the run's
    accepted ones, for a judgement taken up), ``settling`` says when its
    chunks were sent."""

    def __init__(
        self,
        canary: Canary,
        ledger: Ledger,
        run: str,
        planner: Planner,
        following: Following,
        settling: Settling,
    ) -> None:
        self._canary, self._ledger, self._run = canary, ledger, run
        self._planner, self._chunk_size = planner, planner.chunk_size
        self._following, self._settling = following, settling
        self.gated = True
        """Chunks handed over wait for the canary's verdict."""
        self._left = 0
        """Canary recipients still to hand over."""

    async def start(self) -> None:
        """Take the canary up where the run left it: judged already (the
        gate is open), being judged when a send stopped (judged now), or
        with some of its recipients still to send."""
        canary = self._canary
        info = await self._ledger.run_info(self._run)
        if (pause := judging(info)) is not None:
            await self._follow_sent()
            await self._judge(canary, pause.paused_at)
        elif info is not None and info.canary_judged is not None:
            self._open()
        elif (left := canary.size - await self._sent()) > 0:
            self._hold(left)
        else:
            await self._follow_sent()
            await self._judge(canary, time.time(), sent_now=True)

    async def _follow_sent(self) -> None:
        """Follow the run's accepted launches not yet final, their statuses
        read once (however long ago they were sent) before a judgement."""
        if await self._following.add_accepted(self._ledger):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._following.written.wait(), FLUSH_SECONDS * 2)

    def gate(self, hand_over: HandOver) -> HandOver:
        """``hand_over`` behind the canary's gate."""

        async def gated(handed: Handed) -> object:
            if not self.gated:
                return await hand_over(handed)
            self._settling.handing(handed)
            handed_over = await hand_over(handed)
            self._left -= len(handed.planned.phones) - len(handed.held)
            if self._left > 0:
                self._hold(self._left)
                return handed_over
            await self._settling.settled()
            # Claims may have taken fewer than were planned (a cool-down,
            # the daily limit): the canary goes on until it has its size.
            if (left := self._canary.size - await self._sent()) > 0:
                self._hold(left)
            else:
                await self._judge(self._canary, time.time(), sent_now=True)
            return handed_over

        return gated

    def _hold(self, left: int) -> None:
        """``left`` canary recipients to go: no chunk planned larger."""
        self._left = left
        self._planner.chunk_size = min(self._chunk_size, left)

    def _open(self) -> None:
        self.gated = False
        self._planner.chunk_size = self._chunk_size

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
            if not await ledger.judge_canary(run, detail):
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
                # As loud as the pause that announced the judgement: both are shown.
                log.warning("run %s: its canary held (%s): sending the rest", run, judgement.detail)
            break
        # Resumed by a person meanwhile, the rest goes without the verdict.
        self._open()


class SettledInLedger:
    """The :class:`Settling` of a canary that others send (the workers):
    its recipients read in the ledger until none is planned or in flight,
    each launch followed as soon as the ledger holds it accepted."""

    def __init__(self, ledger: Ledger, run: str, following: Following) -> None:
        self._ledger, self._run, self._following = ledger, run, following
        self._phones: list[str] = []
        """The recipients of the canary's chunks handed over."""

    def handing(self, handed: Handed) -> None:
        held = {record.phone for record in handed.held}
        self._phones += (phone for phone in handed.planned.phones if phone not in held)

    async def settled(self) -> None:
        ledger, run = self._ledger, self._run
        while True:
            # A worker that died mid-chunk leaves a claim that expires: its
            # recipients are reported ambiguous, as the run's progress does.
            await ledger.expire(run)
            held = await ledger.held(run, self._phones)
            await self._following.add_accepted(ledger)
            if not any(record.state in (PLANNED, IN_FLIGHT) for record, _ in held.values()):
                return
            info = await ledger.run_info(run)
            if info is None or info.paused is not None:
                return  # no worker claims them: the gate opens to the pause
            await asyncio.sleep(SETTLED_POLL)


@contextlib.asynccontextmanager
async def workers_canary(
    client: BulkClient, ledger: Ledger, run: str, canary: Canary, planner: Planner
) -> AsyncIterator[CanaryGate]:
    """The canary's gate of a run that the workers send (``submit_run``'s),
    taken up where the run left it (a judgement under way is made first);
    its launches are followed, with ``client``, for as long as the block
    lasts. The following's own failure (the ledger's) is raised at the end."""
    following = Following(
        client.transport, ledger, run, TrackOptions("settled"), DEFAULT_FOLLOW_CONCURRENCY
    )
    gate = CanaryGate(
        canary, ledger, run, planner, following, SettledInLedger(ledger, run, following)
    )
    task = asyncio.create_task(logging_failures(following))
    try:
        await gate.start()
        yield gate
    finally:
        task.cancel()
        await asyncio.wait([task])
    if not task.cancelled() and (failed := task.exception()) is not None:
        raise failed


def judging(info: RunInfo | None) -> RunPause | None:
    """The run's pause while its canary is judged, if it is."""
    pause = None if info is None else info.paused
    if pause is not None and pause.reason == CANARY and pause.detail.startswith(JUDGING):
        return pause
    return None
