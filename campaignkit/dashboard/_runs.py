"""What the list reads besides the launches: a ledger's bulk runs (each
run's launches and start) and the polls' names."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .. import errors
from .._redaction import sdk_logger
from ..ledger import ACCEPTED, Ledger, RunInfo

if TYPE_CHECKING:
    from ..client import CampaignClient

__all__ = ["PollNames", "Runs", "poll_id", "run_launches", "sent_times"]

log = sdk_logger("campaignkit.dashboard")


def poll_id(poll: str) -> int | None:
    """A run's poll (kept as text by the ledger) as the service's id."""
    return int(poll) if poll.isdigit() else None


async def run_launches(ledger: Ledger, run: str) -> tuple[str, ...]:
    """The launches of the run, in the order of its accepted records."""
    launches: dict[str, None] = {}
    async for record in ledger.records(run, [ACCEPTED]):
        if record.launch_request_id:
            launches[record.launch_request_id] = None
    return tuple(launches)


async def sent_times(ledger: Ledger, run: str, launches: Collection[str]) -> dict[str, datetime]:
    """When each of the run's ``launches`` was sent: when the ledger's claim
    of its request was taken (the request leaves right after it)."""
    phones = await ledger.launch_phones(run, launches)
    first = {listed[0]: launch for launch, listed in phones.items() if listed}
    held = await ledger.held(run, list(first))
    return {
        first[phone]: datetime.fromtimestamp(claimed, UTC)
        for phone, (_, claimed) in held.items()
        if claimed is not None
    }


class Runs:
    """A ledger's runs: each one's launches and when each was sent, read
    from its accepted records again only when their count moves."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._launches: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._sent: dict[str, datetime] = {}

    async def read(self, info: RunInfo) -> tuple[Mapping[str, int], tuple[str, ...]]:
        """The run's counts by ledger state and its launches."""
        run = info.run
        counts = await self.ledger.counts(run)
        known = self._launches.get(run)
        if known is None or known[0] != counts[ACCEPTED]:
            launches = await run_launches(self.ledger, run)
            new = [launch for launch in launches if launch not in self._sent]
            self._sent.update(await sent_times(self.ledger, run, new))
            known = self._launches[run] = (counts[ACCEPTED], launches)
        return counts, known[1]

    def launches(self) -> set[str]:
        """Every launch of the runs read so far."""
        return {launch for _, launches in self._launches.values() for launch in launches}

    def sent(self, launch_request_id: str) -> datetime | None:
        """When the launch was sent, if a run read so far sent it."""
        return self._sent.get(launch_request_id)

    def sent_of(self, launches: Iterable[str]) -> dict[str, datetime]:
        """When each of ``launches`` known here was sent."""
        return {launch: sent for launch in launches if (sent := self.sent(launch)) is not None}


class PollNames:
    """The polls' names, read again when one is missing, at most once a minute."""

    def __init__(self, client: CampaignClient) -> None:
        self._client = client
        self._names: dict[int, str] = {}
        self._read_at: float | None = None

    def get(self, poll: int | None) -> str | None:
        return None if poll is None else self._names.get(poll)

    async def learn(self, wanted: Iterable[int | None]) -> None:
        missing = {poll for poll in wanted if poll is not None} - self._names.keys()
        now = asyncio.get_running_loop().time()
        if not missing or (self._read_at is not None and now - self._read_at < 60):
            return
        self._read_at = now
        try:
            self._names.update((poll.id, poll.name) for poll in await self._client.list_polls())
        except errors.CampaignKitError as exc:
            log.warning("reading the polls' names failed: %s", exc)
