"""Replies of users and the webhooks of their flows.

Timed calls (delivered, read, opt-out) and spontaneous replies wait in one
heap by sandbox time; they are drawn at launch time, and only for the kinds
the poll has a URL for, so a large send without webhooks costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import random
from typing import Any

from .._redaction import sdk_logger
from ..status import DeploymentStatus
from ._outcomes import OUTCOMES, wire
from ._state import Company, Launch, NotRepliable, World
from ._webhooks import Webhooks, closed_event, flat_event

__all__ = ["Replies"]

log = sdk_logger("campaignkit.sandbox")
_DELIVERED = wire(DeploymentStatus.DELIVERED)
_OPTOUT = wire(DeploymentStatus.FAILURE_BY_OPTOUT_CONTACT)


class Replies:
    """Schedules spontaneous replies and timed calls, and makes the calls.

    A failing webhook is logged and recorded in the company's ``webhook_log``;
    it never breaks the sandbox.
    """

    def __init__(self, world: World) -> None:
        self._world = world
        self._due: list[tuple[float, int, str, str, int, str]] = []
        self._seq = 0
        self._wake = asyncio.Event()
        self._webhooks = Webhooks(world.config.webhook_timeout)
        self._task: asyncio.Task[None] | None = None
        self._deliveries: set[asyncio.Task[Any]] = set()
        world.clock.subscribe(self._wake.set)

    async def start(self) -> None:
        await self._webhooks.start()
        self._task = asyncio.create_task(self._run(), name="sandbox-replies")

    async def stop(self) -> None:
        tasks = [*self._deliveries, *([self._task] if self._task else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._webhooks.stop()

    def _push(self, due: float, company: Company, launch: Launch, index: int, kind: str) -> None:
        self._seq += 1
        heapq.heappush(self._due, (due, self._seq, company.id, launch.id, index, kind))

    def schedule(self, company: Company, launch: Launch) -> None:
        """Draw which delivered users of ``launch`` reply, and when (seeded),
        and when the delivered, read and opt-out calls of the poll go out."""
        config = self._world.config
        step = config.step_seconds
        urls = company.targets(launch.poll_id).urls
        timed = [kind for kind in ("delivered", "read", "opt_out") if kind in urls]
        rng = random.Random(f"{config.seed}:{launch.id}")
        for index, d in enumerate(launch.deployments):
            outcome = OUTCOMES[d.outcome]
            if timed:
                changes = dict(outcome.history(d.taken_at, step, float("inf")))
                if _DELIVERED in changes and "delivered" in timed:
                    self._push(changes[_DELIVERED], company, launch, index, "delivered")
                if _DELIVERED in changes and "read" in timed:
                    self._push(changes[_DELIVERED] + step, company, launch, index, "read")
                if _OPTOUT in changes and "opt_out" in timed:
                    self._push(changes[_OPTOUT], company, launch, index, "opt_out")
            if config.reply_probability and rng.random() < config.reply_probability:
                delivered = outcome.delivered_at(d.taken_at, step)
                if delivered is not None:
                    self._push(delivered + config.reply_delay, company, launch, index, "reply")
        self._wake.set()

    async def reply(
        self, company: Company, launch: Launch, index: int, text: str
    ) -> dict[str, Any]:
        """Apply one reply and make the calls it causes: the response (its
        answer's keys merged before the flow's next question is sent) and,
        when the flow ends, conversation closed."""
        record, created, question, following = self._world.reply(company, launch, index, text)
        targets = company.targets(launch.poll_id)
        now = self._world.clock.now()
        sent_at = record.created_us / 1e6
        payload = flat_event("response", record, question, sent_at, now, text)
        call = await self._webhooks.post(targets, "response", payload, company.webhook_log)
        if call and call["keys"]:
            self._world.merge_answer(record, call["keys"], call["types"])
        if following is not None:
            self._world.ask(record, following)
        result: dict[str, Any] = {
            "session_external_id": record.id,
            "created": created,
            "webhook": call,
            "closed": None,
        }
        if record.answered == len(company.questions(launch.poll_id)):
            line = launch.deployments[index].line
            closed = closed_event(record, company.number, line, self._world.clock.now())
            result["closed"] = await self._webhooks.post(
                targets, "conversation_closed", closed, company.webhook_log
            )
        return result

    async def account_event(
        self, company: Company, kind: str, payload: dict[str, Any]
    ) -> dict[str, Any] | None:
        """POST an account event (one of no flow, e.g. a template's status) to
        the company's URL for ``kind`` (a poll's own URLs are its flows'),
        and record the call; None without a URL."""
        return await self._webhooks.post(company.webhooks, kind, payload, company.webhook_log)

    async def _timed(self, company: Company, launch: Launch, index: int, kind: str) -> None:
        record = self._world.open_session(company, launch, index)
        now = self._world.clock.now()
        question = company.questions(launch.poll_id)[0]
        payload = flat_event(kind, record, question, record.created_us / 1e6, now)
        targets = company.targets(launch.poll_id)
        call = await self._webhooks.post(targets, kind, payload, company.webhook_log)
        if call and call["keys"]:
            self._world.merge_answer(record, call["keys"], call["types"])

    async def _run(self) -> None:
        clock = self._world.clock
        while True:
            self._wake.clear()
            now = clock.now()
            while self._due and self._due[0][0] <= now:
                _, _, company_id, launch_id, index, kind = heapq.heappop(self._due)
                self._spawn(company_id, launch_id, index, kind)
            timeout = clock.real_delay(self._due[0][0] - now) if self._due else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _spawn(self, company_id: str, launch_id: str, index: int, kind: str) -> None:
        company = self._world.companies[company_id]
        launch = company.launches[launch_id]
        task = asyncio.create_task(self._quietly(company, launch, index, kind))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _quietly(self, company: Company, launch: Launch, index: int, kind: str) -> None:
        try:
            if kind == "reply":
                await self.reply(company, launch, index, "Yes")
            else:
                await self._timed(company, launch, index, kind)
        except NotRepliable:  # the clock was set back since the draw
            log.info("scheduled reply skipped: %s", launch.conversation_id(index))
