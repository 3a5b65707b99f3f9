"""The launches a dashboard knows: those it was given or asked to show, and
those a ``discover`` hook lists (the sandbox's launches), each watched."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

import aiohttp

from .._redaction import sdk_logger
from ._html import LaunchSummary
from ._watch import Signal, Watch

if TYPE_CHECKING:
    from ..client import CampaignClient

__all__ = ["Dashboard", "Discover", "sandbox_launches"]

log = sdk_logger("campaignkit.dashboard")

Discover = Callable[[], Awaitable[Iterable[str]]]
"""Lists launch request ids, oldest first (the real service has no such call)."""


def sandbox_launches(admin_url: str, api_key: str) -> Discover:
    """A :data:`Discover` hook listing the launches a sandbox holds for the
    company of ``api_key`` (``Sandbox.admin_url``, ``Sandbox.api_key``)."""

    async def discover() -> list[str]:
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{admin_url}/state", params={"users": "0"}) as response,
        ):
            response.raise_for_status()
            state = await response.json()
        return [
            launch["launch_request_id"]
            for company in state["companies"]
            if company["api_key"] == api_key
            for launch in company["launches"]
        ]

    return discover


class Dashboard:
    """Known launches by id, each with its :class:`Watch`; ``signal`` moves
    whenever the list or any launch changes. Watches start with :meth:`start`
    (on the app's start-up) and stop with :meth:`close`."""

    def __init__(
        self,
        client: CampaignClient,
        *,
        launches: Iterable[str] = (),
        discover: Discover | None = None,
        discover_limit: int = 20,
        discover_every: float = 2.0,
        poll_interval: float = 1.0,
        max_interval: float = 10.0,
        linger: float = 600.0,
    ) -> None:
        self.client = client
        self.signal = Signal()
        self.url: str | None = None
        """Where it is served, once it is (:func:`running_dashboard`)."""
        self.closed = False
        self.discover_every = discover_every
        self._discover = discover
        self._discover_limit = discover_limit
        self._discovered_at: float | None = None
        self._discovering = asyncio.Lock()
        self._options = {
            "poll_interval": poll_interval,
            "max_interval": max_interval,
            "linger": linger,
        }
        self._watches: dict[str, Watch] = {}
        self._started = False
        for launch_request_id in launches:
            self.add(launch_request_id)

    def add(self, launch_request_id: str) -> Watch:
        """Show (and watch) a launch; a known one is returned as is."""
        watch = self._watches.get(launch_request_id)
        if watch is None:
            watch = Watch(
                self.client, launch_request_id, on_change=self.signal.bump, **self._options
            )
            self._watches[launch_request_id] = watch
            if self._started:
                watch.start()
            self.signal.bump()
        return watch

    def get(self, launch_request_id: str) -> Watch | None:
        return self._watches.get(launch_request_id)

    def summaries(self) -> list[LaunchSummary]:
        """Every known launch, the most recently added first."""
        return [watch.summary for watch in reversed(self._watches.values())]

    async def refresh(self) -> None:
        """Add what ``discover`` lists (its last ``discover_limit``), at most
        once every ``discover_every`` seconds; a failure is logged, not raised."""
        if self._discover is None:
            return
        async with self._discovering:
            now = asyncio.get_running_loop().time()
            if self._discovered_at is not None and now - self._discovered_at < self.discover_every:
                return
            self._discovered_at = now
            try:
                found = list(await self._discover())
            except Exception as exc:
                log.warning("listing launches failed: %s", exc)
                return
        for launch_request_id in found[-self._discover_limit :]:
            self.add(launch_request_id)

    async def start(self) -> None:
        self._started = True
        for watch in self._watches.values():
            watch.start()
        await self.refresh()

    async def close(self) -> None:
        """Stop every watch and wake every reader so it can end."""
        self.closed = True
        await asyncio.gather(*(watch.close() for watch in self._watches.values()))
        for watch in self._watches.values():
            watch.signal.bump()
        self.signal.bump()
