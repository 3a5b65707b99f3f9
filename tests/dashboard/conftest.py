"""A sandbox campaign mixing every kind of outcome, for the dashboard's tests."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import tenacity

from campaignkit import CampaignClient, DeploymentStatus, User
from campaignkit.ledger import Ledger, SqliteLedger
from campaignkit.sandbox import Sandbox

ORDINARY = 12  # they end DELIVERED
MAGIC = range(3, 30)  # 99NN ends in status NN; 00-02 would stay in progress for good


@pytest.fixture
def users() -> list[User]:
    ordinary = [User(cellphone=f"300{i:07d}", country_code="+57") for i in range(ORDINARY)]
    magic = [User(cellphone=f"3101{nn:02d}99{nn:02d}", country_code="+57") for nn in MAGIC]
    return ordinary + magic


UNTIL_OVER = tenacity.AsyncRetrying(
    retry=tenacity.retry_if_result(lambda over: not over), wait=tenacity.wait_fixed(0.05)
)
Settle = Callable[[str], Awaitable[Counter[DeploymentStatus | None]]]


@pytest.fixture
async def sandbox() -> AsyncIterator[Sandbox]:
    async with Sandbox(speed=50) as sb:
        yield sb


@pytest.fixture
async def client(sandbox: Sandbox) -> AsyncIterator[CampaignClient]:
    async with sandbox.client() as client:
        yield client


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    """A SQLite ledger of bulk runs."""
    async with SqliteLedger(tmp_path / "runs.db") as ledger:
        yield ledger


@pytest.fixture
def send(client: CampaignClient, users: list[User]) -> Callable[[], Awaitable[str]]:
    """Sends the mixed campaign; returns its launch request id."""

    async def send() -> str:
        polls = await client.list_polls()
        return (await client.send_campaign(polls[0].id, users)).launch_request_id

    return send


@pytest.fixture
def settle(sandbox: Sandbox, client: CampaignClient) -> Settle:
    """Wait until the sandbox has moved every deployment of a launch to its
    final status, then read them with a tracker; its counts."""

    async def settle(launch_request_id: str) -> Counter[DeploymentStatus | None]:
        async with asyncio.timeout(20):
            await UNTIL_OVER(_over, sandbox, launch_request_id)
            tracker = client.track(launch_request_id, until="settled", poll_interval=0.05)
            async for _ in tracker:
                pass
        return tracker.counts

    return settle


async def _over(sandbox: Sandbox, launch_request_id: str) -> bool:
    snapshot = await sandbox.snapshot(launch=launch_request_id)
    users = snapshot["companies"][0]["launches"][0]["users"]
    return all(u["history"] and u["history"][-1]["status"] == u["final_status"] for u in users)
