"""Watching a run while it sends: its accepted launches followed as soon as
their chunks are settled, so that what the outcomes judge acts while the run
still sends (the ledger's breaker pauses it where the statuses are written:
no claim takes anything more, the producer hands nothing more over), and
the canary's gate (``CanaryGate``), which holds the rest of the input back
until the first recipients' outcomes say it may go.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from ..ledger import ACCEPTED, Ledger
from ..tracker import TrackOptions
from ._canary import CanaryGate
from ._follow import DEFAULT_FOLLOW_CONCURRENCY, Following, logging_failures, unfinished_launches
from ._options import BulkOptions
from ._pipeline import Handed, HandOver, Sent
from ._planner import Planner
from ._seam import BulkClient


class Watch:
    """The following and the canary of one ``send_bulk``: launches given by
    :meth:`sent` are followed (every one with ``follow``, the canary's
    otherwise), chunks handed over through :meth:`gate` wait for the
    canary's verdict, and :meth:`during` runs the send with them. It is the
    canary's ``Settling``: its chunks are sent here."""

    def __init__(
        self,
        client: BulkClient,
        ledger: Ledger,
        run: str,
        options: BulkOptions,
        planner: Planner,
    ) -> None:
        self._ledger, self._run, self._options = ledger, run, options
        self._following = Following(
            client.transport, ledger, run, TrackOptions("settled"), DEFAULT_FOLLOW_CONCURRENCY
        )
        canary, following = options.canary, self._following
        self._canary = (
            None if canary is None else CanaryGate(canary, ledger, run, planner, following, self)
        )
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
                    if self._canary is not None:
                        await self._canary.start()
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
            await self._following.add_accepted(self._ledger)
        await logging_failures(self._following)

    def gate(self, hand_over: HandOver) -> HandOver:
        """``hand_over`` behind the canary's gate (if the send has a canary)."""
        return hand_over if self._canary is None else self._canary.gate(hand_over)

    def sent(self, chunk: str, sent: Sent | None) -> None:
        """``chunk`` was sent (``sent``) or found nothing to claim (None)."""
        result = None if sent is None else sent.result
        followed = self._options.follow or chunk in self._pending
        if followed and result is not None and result.outcome == "accepted" and result.ack:
            self._following.add(result.ack)
        self._pending.discard(chunk)
        if not self._pending:
            self._settled.set()

    # -- the canary's Settling: its chunks are sent by this send's senders

    def handing(self, handed: Handed) -> None:
        self._pending.add(handed.chunk)
        self._settled.clear()

    async def settled(self) -> None:
        await self._settled.wait()


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
        self._task = asyncio.create_task(logging_failures(self._following))
        return self

    async def feed(self) -> None:
        """Follow the launches accepted since the last feed."""
        claims = await self._ledger.claims(self._run)
        for launch in unfinished_launches(claims, self._final, self._claims).values():
            self._following.add(launch)
        self._claims.update(claim for claim, _, state, _, _ in claims if state == ACCEPTED)

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
