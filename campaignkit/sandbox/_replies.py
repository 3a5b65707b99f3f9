"""Replies of users and the first-reply webhook."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import random
from typing import Any

import aiohttp

from .._redaction import sdk_logger
from ._outcomes import OUTCOMES
from ._state import Company, Launch, NotRepliable, World

__all__ = ["Replies"]

log = sdk_logger("campaignkit.sandbox")
WEBHOOK_TIMEOUT = aiohttp.ClientTimeout(total=10)


class Replies:
    """Schedules spontaneous replies and POSTs first-reply webhooks.

    Owns the aiohttp ClientSession used for webhooks. A failing webhook is
    logged and recorded in the company's ``webhook_log``; it never breaks
    the sandbox.
    """

    def __init__(self, world: World) -> None:
        self._world = world
        self._due: list[tuple[float, int, str, str, int]] = []
        self._seq = 0
        self._wake = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._deliveries: set[asyncio.Task[Any]] = set()
        world.clock.subscribe(self._wake.set)

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=WEBHOOK_TIMEOUT)
        self._task = asyncio.create_task(self._run(), name="sandbox-replies")

    async def stop(self) -> None:
        tasks = [*self._deliveries, *([self._task] if self._task else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    def schedule(self, company: Company, launch: Launch) -> None:
        """Draw which delivered users of ``launch`` reply, and when (seeded)."""
        probability = self._world.config.reply_probability
        if not probability:
            return
        rng = random.Random(f"{self._world.config.seed}:{launch.id}")
        step = self._world.config.step_seconds
        for index, d in enumerate(launch.deployments):
            if rng.random() >= probability:
                continue
            delivered = OUTCOMES[d.outcome].delivered_at(d.taken_at, step)
            if delivered is not None:
                self._seq += 1
                due = delivered + self._world.config.reply_delay
                heapq.heappush(self._due, (due, self._seq, company.id, launch.id, index))
        self._wake.set()

    async def reply(
        self, company: Company, launch: Launch, index: int, text: str
    ) -> dict[str, Any]:
        """Apply one reply; on the first one, deliver the webhook and report it."""
        record, created = self._world.reply(company, launch, index, text)
        result: dict[str, Any] = {
            "session_external_id": record.id,
            "created": created,
            "webhook": None,
        }
        if created and company.webhook_url:
            result["webhook"] = await self._deliver(company, self._world.webhook_payload(record))
        return result

    async def _deliver(self, company: Company, payload: dict[str, Any]) -> dict[str, Any]:
        url = company.webhook_url
        entry: dict[str, Any] = {"url": url, "payload": payload, "status": None, "error": None}
        company.webhook_log.append(entry)
        if url is None or self._session is None:
            return entry
        try:
            async with self._session.post(url, json=payload) as response:
                entry["status"] = response.status
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
            log.warning("webhook %s failed: %s", url, entry["error"])
        return entry

    async def _run(self) -> None:
        clock = self._world.clock
        while True:
            self._wake.clear()
            now = clock.now()
            while self._due and self._due[0][0] <= now:
                _, _, company_id, launch_id, index = heapq.heappop(self._due)
                self._spontaneous(company_id, launch_id, index)
            timeout = clock.real_delay(self._due[0][0] - now) if self._due else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _spontaneous(self, company_id: str, launch_id: str, index: int) -> None:
        company = self._world.companies[company_id]
        launch = company.launches[launch_id]
        task = asyncio.create_task(self._reply_quietly(company, launch, index))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _reply_quietly(self, company: Company, launch: Launch, index: int) -> None:
        try:
            await self.reply(company, launch, index, "Yes")
        except NotRepliable:  # the clock was set back since the draw
            log.info("scheduled reply skipped: %s", launch.conversation_id(index))
