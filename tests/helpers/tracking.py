"""What the tracker's tests share: status answers, scripting them on a
:class:`~helpers.exchange.ScriptedExchange`, collecting the stream, and a tiny
local status server (for cancellation, open connections and track_many's bound).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from campaignkit import CampaignAck, DeploymentChange, DeploymentStatus
from helpers.exchange import ScriptedExchange
from helpers.servers import serving

S = DeploymentStatus
KEY = "sk_tst_tracker_123456"
CAMPAIGN = "https://campaigns.example.com"
URL = f"{CAMPAIGN}/v2/send-campaign/lr-1"
ACK = CampaignAck("queued", "12", "b-1", "lr-1", "/v2/send-campaign/lr-1")

Entry = dict[str, Any]
Triple = tuple[str, str | None, str]


def dep(i: int | str, status: str | None, **extra: Any) -> Entry:
    """A deployment entry of a status answer."""
    entry: Entry = {
        "conversation_id": f"c{i}",
        "service_id": f"s{i}",
        "cellphone": f"30000000{i}",
        "business_scope_id": None,
        "username": None,
        "status": status,
    }
    entry.update(extra)
    return entry


def answer(state: str, *deployments: Any, launch: str = "lr-1") -> dict[str, Any]:
    """A campaign status answer (entries may be malformed on purpose)."""
    return {
        "launch_request_id": launch,
        "status": state,
        "poll_id": 12,
        "deployments": list(deployments),
    }


def triples(changes: list[DeploymentChange]) -> list[Triple]:
    return [
        (
            c.deployment.conversation_id,
            None if c.previous is None else c.previous.value,
            c.current.value,
        )
        for c in changes
    ]


Scripted = dict[str, Any] | BaseException | tuple[int, str, dict[str, str]]


def script(m: ScriptedExchange, *answers: Scripted, url: str = URL) -> None:
    """Register answers in order; a dict is a 200 JSON answer, a tuple
    ``(status, body, headers)`` anything else, an exception is raised."""
    for item in answers:
        if isinstance(item, dict):
            m.get(url, payload=item)
        elif isinstance(item, BaseException):
            m.get(url, exception=item)
        else:
            status, body, headers = item
            m.get(url, status=status, body=body, headers=headers)


def requests_to(m: ScriptedExchange, url: str = URL) -> int:
    return len(m.calls("GET", url))


async def collect(tracker: AsyncIterable[DeploymentChange]) -> list[DeploymentChange]:
    return [change async for change in tracker]


async def collect_into(
    tracker: AsyncIterable[DeploymentChange], got: list[DeploymentChange]
) -> None:
    async for change in tracker:
        got.append(change)


def now() -> datetime:
    return datetime.now(UTC)


def leftover_tasks() -> set[asyncio.Task[Any]]:
    """Running tasks other than this test's, ignoring the local server's own
    request handlers (they live in the same loop)."""
    return {
        task
        for task in asyncio.all_tasks()
        if task is not asyncio.current_task()
        and not task.get_coro().__qualname__.startswith("RequestHandler.")  # type: ignore[union-attr]
    }


class StatusServer:
    """Serves scripted campaign statuses per launch, counts concurrency."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.polls: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.scripts: dict[str, list[dict[str, Any]]] = {}
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        launch = request.match_info["launch"]
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        script = self.scripts.get(launch)
        if script is None:
            return web.json_response({"detail": "not found"}, status=404)
        index = min(self.polls[launch], len(script) - 1)
        self.polls[launch] += 1
        return web.json_response(script[index])


@contextlib.asynccontextmanager
async def serving_statuses() -> AsyncIterator[StatusServer]:
    """A :class:`StatusServer` on a free port; its ``url`` has a path prefix."""
    state = StatusServer()
    app = web.Application()
    app.router.add_get("/prefix/v2/send-campaign/{launch}", state.handle)
    async with serving(app) as url:
        state.url = f"{url}/prefix"
        yield state
