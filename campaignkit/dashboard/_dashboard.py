"""The launches a dashboard knows: those it was given or asked to show, and
those a ``discover`` hook lists (the sandbox's launches), each watched."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import aiohttp
import attrs

from .. import errors
from .._redaction import sdk_logger
from ..ledger import STALL_AFTER, Ledger, RunInfo, RunPause, Stall
from ._html import LaunchSummary
from ._listing import PAGE_SIZE, Listing, RunSummary
from ._run_report import read_run_report, render_run_report
from ._runs import PollNames, Runs, poll_id
from ._watch import Signal, Watch

if TYPE_CHECKING:
    from ..client import CampaignClient

__all__ = ["Dashboard", "Discover", "UnknownLaunch", "UnknownRun", "sandbox_launches"]

log = sdk_logger("campaignkit.dashboard")

Discover = Callable[[], Awaitable[Iterable[str]]]
"""Lists launch request ids, oldest first (the real service has no such call)."""

MAX_KNOWN = 10_000
"""Launches listed (followed or not); beyond it the oldest are forgotten."""

LAUNCH_ID = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
"""What a launch request id may look like; anything else is not asked about."""


class UnknownLaunch(LookupError):
    """The service has no launch of that id (or it cannot be one)."""


class UnknownRun(LookupError):
    """The dashboard's ledger has no run of that name (or it has no ledger)."""


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
    """Known launches by id, at most ``max_followed`` of them followed, each
    with its :class:`Watch`, and the bulk runs of ``ledger``; ``signal``
    moves whenever the list or any launch changes. Watches start with
    :meth:`start` (on the app's start-up) and stop with :meth:`close`.

    A run whose planned recipients nobody has claimed for ``stall_after``
    seconds is shown stalled, with the command that hands them over again;
    ``journal`` is how that command names the ledger (``JOURNAL`` unless
    given)."""

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
        max_followed: int = 50,
        max_lookups: int = 4,
        ledger: Ledger | None = None,
        journal: str | None = None,
        stall_after: float = STALL_AFTER,
    ) -> None:
        if max_followed < 1:
            raise ValueError("max_followed must be at least 1")
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
        self.max_followed = max_followed
        self._runs = None if ledger is None else Runs(ledger)
        """The ledger's bulk runs, listed with their launches (the caller
        opens and closes the ledger)."""
        self._journal = journal or "JOURNAL"
        self._stall_after = stall_after
        self._polls = PollNames(client)
        self._known: dict[str, None] = {}
        """Every launch given, discovered or followed, oldest first (the list's rows)."""
        self._watches: dict[str, Watch] = {}
        self._viewed: dict[str, int] = {}
        self._views = itertools.count()
        self._lookups = asyncio.Semaphore(max_lookups)
        self._closing: set[asyncio.Task[None]] = set()
        self._started = False
        for launch_request_id in launches:
            self.add(launch_request_id)

    def add(self, launch_request_id: str) -> Watch:
        """Show (and watch) a launch, trusted to exist; a known one is returned
        as is. Beyond ``max_followed`` launches the least recently viewed one
        is dropped (its tracker closed)."""
        self._viewed[launch_request_id] = next(self._views)
        self._know(launch_request_id)
        watch = self._watches.get(launch_request_id)
        if watch is None:
            watch = Watch(
                self.client, launch_request_id, on_change=self.signal.bump, **self._options
            )
            self._watches[launch_request_id] = watch
            if self._started:
                watch.start()
            while len(self._watches) > self.max_followed:
                self._drop(min(self._viewed, key=self._viewed.__getitem__))
            self.signal.bump()
        return watch

    def _know(self, launch_request_id: str) -> None:
        if launch_request_id not in self._known:
            self._known[launch_request_id] = None
            if len(self._known) > MAX_KNOWN:
                del self._known[next(iter(self._known))]

    async def follow(self, launch_request_id: str) -> Watch:
        """The watch of a launch a visitor asked for: a followed one is
        returned (and counts as viewed); another is first looked up with one
        status call (at most ``max_lookups`` at once) and followed only if the
        service knows it.

        Raises :class:`UnknownLaunch`, or the :class:`~campaignkit.errors.CampaignKitError`
        of a lookup that failed otherwise."""
        if launch_request_id in self._watches:
            return self.add(launch_request_id)
        if not LAUNCH_ID.fullmatch(launch_request_id):
            raise UnknownLaunch(launch_request_id)
        async with self._lookups:
            try:
                await self.client.get_campaign_status(launch_request_id)
            except errors.NotFoundError as exc:
                raise UnknownLaunch(launch_request_id) from exc
        return self.add(launch_request_id)

    @property
    def followed(self) -> int:
        """Launches followed now (at most ``max_followed``)."""
        return len(self._watches)

    def _drop(self, launch_request_id: str) -> None:
        watch = self._watches.pop(launch_request_id)
        del self._viewed[launch_request_id]
        if not self._started:  # given beyond the bound before serving: never tracked
            watch.dropped = True
            return
        task = asyncio.get_running_loop().create_task(watch.close(dropped=True))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def get(self, launch_request_id: str) -> Watch | None:
        return self._watches.get(launch_request_id)

    def summaries(self) -> list[LaunchSummary]:
        """Every followed launch, the most recently added first."""
        return [self.summary(watch) for watch in reversed(self._watches.values())]

    def summary(self, watch: Watch) -> LaunchSummary:
        """The watch's summary, with its poll's name once known."""
        summary = watch.summary
        sent = None if self._runs is None else self._runs.sent(watch.launch_request_id)
        return attrs.evolve(summary, poll_name=self._polls.get(summary.poll_id), sent=sent)

    async def listing(self, page: int = 1) -> Listing:
        """Page ``page`` of the list: the ledger's runs, newest first, each
        with its launches, then the launches of no run listed, newest first."""
        await self.refresh()
        infos = [] if self._runs is None else await self._runs.ledger.runs()
        await self._polls.learn(
            [watch.poll_id for watch in self._watches.values()]
            + [poll_id(info.poll) for info in infos]
        )
        page = max(page, 1)
        shown = slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE)
        runs = [await self._run_summary(info) for info in infos[shown]]
        in_runs = set() if self._runs is None else self._runs.launches()
        alone = [launch for launch in reversed(self._known) if launch not in in_runs]
        pages = max(1, -(-max(len(infos), len(alone)) // PAGE_SIZE))
        return Listing(tuple(runs), tuple(map(self._row, alone[shown])), page, pages)

    def _row(self, launch_request_id: str) -> LaunchSummary | str:
        watch = self._watches.get(launch_request_id)
        return launch_request_id if watch is None else self.summary(watch)

    async def _run_summary(self, info: RunInfo) -> RunSummary:
        assert self._runs is not None
        counts, launches = await self._runs.read(info)
        poll = poll_id(info.poll)
        stall = await self._runs.ledger.stall(info.run, stall_after=self._stall_after)
        return RunSummary(
            info.run,
            poll,
            self._polls.get(poll),
            datetime.fromtimestamp(info.created, UTC),
            counts,
            info.input_done,
            tuple(map(self._row, launches)),
            await self._runs.ledger.funnel(info.run),
            stall,
            None if stall is None else Stall.command(info, self._journal),
            self._runs.sent_of(launches),
            info.paused,
            None if info.paused is None else RunPause.command(info.run, self._journal),
        )

    async def run_report(self, run: str) -> str:
        """The report of the ledger's bulk run ``run``, read from the ledger
        alone (its poll's name as the list last learnt it).

        Raises :class:`UnknownRun`."""
        info = None if self._runs is None else await self._runs.ledger.run_info(run)
        if self._runs is None or info is None:
            raise UnknownRun(run)
        name = self._polls.get(poll_id(info.poll))
        summary, history, phones = await read_run_report(self._runs.ledger, run, poll_name=name)
        return render_run_report(summary, history, phones=phones)

    def launch_sent(self, launch_request_id: str) -> datetime | None:
        """When the launch was sent, if a bulk run listed already sent it."""
        return None if self._runs is None else self._runs.sent(launch_request_id)

    async def named(self, watch: Watch) -> LaunchSummary:
        """The watch's summary, its poll's name read first if unknown."""
        await self._polls.learn([watch.poll_id])
        return self.summary(watch)

    async def refresh(self) -> None:
        """List what ``discover`` lists and follow the newest ``discover_limit``
        of those it had not listed before, at most once every
        ``discover_every`` seconds; a failure is logged, not raised."""
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
        new = [launch for launch in found if launch not in self._known]
        for launch_request_id in new:
            self._know(launch_request_id)
        for launch_request_id in new[-self._discover_limit :]:
            self.add(launch_request_id)
        if new:
            self.signal.bump()

    async def start(self) -> None:
        self._started = True
        for watch in self._watches.values():
            watch.start()
        await self.refresh()

    async def close(self) -> None:
        """Stop every watch and wake every reader so it can end."""
        self.closed = True
        await asyncio.gather(*(watch.close() for watch in self._watches.values()), *self._closing)
        for watch in self._watches.values():
            watch.signal.bump()
        self.signal.bump()
