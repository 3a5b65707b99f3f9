"""Load on one client against the sandbox: 1,000 concurrent status calls and
200 concurrent trackers finish with the connection pool bounded by
``max_connections``, no "Unclosed" warning and no task left behind."""

from __future__ import annotations

import asyncio
import gc
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from campaignkit import CampaignAck, CampaignClient, CampaignState, User
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(30)

MAX_CONNECTIONS = 20


class PeakConnections:
    """Exact count of the TCP connections the sandbox's server holds open,
    from its connection_made / connection_lost hooks."""

    def __init__(self, sb: Sandbox) -> None:
        assert sb._runner is not None
        server: Any = sb._runner.server
        self.open = self.peak = self.total = 0
        made, lost = server.connection_made, server.connection_lost

        def connection_made(handler: Any, transport: Any) -> None:
            self.open += 1
            self.total += 1
            self.peak = max(self.peak, self.open)
            made(handler, transport)

        def connection_lost(handler: Any, exc: BaseException | None = None) -> None:
            self.open -= 1
            lost(handler, exc)

        server.connection_made = connection_made
        server.connection_lost = connection_lost


class ClientPool:
    """Samples the client connector every loop iteration: connections in use
    plus idle ones kept alive."""

    def __init__(self, client: CampaignClient) -> None:
        self.connector: Any = client.session.connector
        self.peak = 0
        self._task: asyncio.Task[None] | None = None

    def size(self) -> int:
        idle = sum(len(conns) for conns in self.connector._conns.values())
        return len(self.connector._acquired) + idle

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, self.size())
            await asyncio.sleep(0)

    def __enter__(self) -> ClientPool:
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


@pytest.fixture
def resource_warnings() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield caught
        gc.collect()
    unclosed = [str(w.message) for w in caught if "nclosed" in str(w.message)]
    assert unclosed == []


def _other_tasks(before: set[asyncio.Task[Any]]) -> list[asyncio.Task[Any]]:
    current = asyncio.current_task()
    return [t for t in asyncio.all_tasks() if t is not current and t not in before and not t.done()]


@pytest.mark.usefixtures("resource_warnings")
async def test_1000_concurrent_status_calls(sb: Sandbox) -> None:
    async with sb.client() as setup:
        ack = await setup.send_campaign(1001, [User(cellphone="5550001234", country_code="+52")])
    await sb.set_clock(advance=60)
    peak = PeakConnections(sb)
    before = set(asyncio.all_tasks())
    started = time.monotonic()
    async with sb.client(max_connections=MAX_CONNECTIONS) as client:
        with ClientPool(client) as pool:
            statuses = await asyncio.gather(
                *(client.get_campaign_status(ack.launch_request_id) for _ in range(1000))
            )
    elapsed = time.monotonic() - started
    assert [s.status for s in statuses] == [CampaignState.DONE] * 1000
    assert 1 < peak.peak <= MAX_CONNECTIONS, peak.peak
    assert 1 < pool.peak <= MAX_CONNECTIONS, pool.peak
    assert peak.total <= MAX_CONNECTIONS  # connections were reused, not churned
    await asyncio.sleep(0)
    assert peak.open == 0  # the client's close closed every connection
    assert _other_tasks(before) == []
    assert elapsed < 25


@pytest.mark.usefixtures("resource_warnings")
async def test_200_concurrent_trackers(sb: Sandbox) -> None:
    # Time stands nearly still while the 200 launches are sent (slow on a loaded
    # machine), then runs: about 3 s of real time from submission to SUCCESS.
    await sb.set_clock(speed=0.001)
    async with sb.client() as setup:
        acks: list[CampaignAck] = [
            await setup.send_campaign(
                1001,
                [User(cellphone=f"556{n:04d}{k}12", country_code="+52") for k in range(2)],
            )
            for n in range(200)
        ]
    await sb.set_clock(speed=1)
    peak = PeakConnections(sb)
    before = set(asyncio.all_tasks())

    async def follow(client: CampaignClient, ack: CampaignAck) -> tuple[CampaignState | None, int]:
        tracker = client.track(
            ack, until="settled", poll_interval=0.05, max_interval=0.2, timeout=20
        )
        changes = [change async for change in tracker]
        polls.append(tracker.stats.polls)
        return tracker.state, len(changes)

    polls: list[int] = []

    async with sb.client(max_connections=MAX_CONNECTIONS) as client:
        with ClientPool(client) as pool:
            results = await asyncio.gather(*(follow(client, ack) for ack in acks))
    assert {state for state, _ in results} == {CampaignState.DONE}
    # Each saw both deployments through RECEIVED, RECEIVED_BY_WORKER and SUCCESS
    # (settled: SUCCESS is out of progress).
    assert [changes for _, changes in results] == [6] * 200
    assert min(polls) > 3  # real tracking: many polls each, all at once
    assert 1 < peak.peak <= MAX_CONNECTIONS, peak.peak
    assert 1 < pool.peak <= MAX_CONNECTIONS, pool.peak
    await asyncio.sleep(0)
    assert peak.open == 0
    assert _other_tasks(before) == []
