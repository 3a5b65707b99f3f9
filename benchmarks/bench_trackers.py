"""Row 9: 200 concurrent trackers on one client against the sandbox (in its own
process): the open connections never exceed the pool limit, and the CPU each
poll costs the client."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from campaignkit import CampaignClient, CampaignTracker, User

from ._floor_server import running
from ._harness import Row

POOL = 20


async def company_key(root: str) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{root}/_sandbox/state?users=0") as answer,
    ):
        state = await answer.json()
    key: str = state["companies"][0]["api_key"]
    return key


async def measure(root: str, trackers: int, users: int) -> Row:
    key = await company_key(root)
    async with CampaignClient(
        key,
        base_url=f"{root}/main",
        campaign_url=f"{root}/campaign",
        agent_url=f"{root}/agent",
        max_connections=POOL,
    ) as client:
        poll_id = (await client.list_polls())[0].id
        acks = await asyncio.gather(
            *(
                client.send_campaign(
                    poll_id,
                    [User(country_code="+57", cellphone=f"31{t:04d}{u:04d}") for u in range(users)],
                )
                for t in range(trackers)
            )
        )
        connector = client.session.connector
        assert connector is not None
        peak = 0
        sampling = True

        async def sample() -> None:
            nonlocal peak
            while sampling:
                # The connector's acquired set is what the pool limit bounds.
                peak = max(peak, len(connector._acquired))
                await asyncio.sleep(0.002)

        sampler = asyncio.create_task(sample())
        tracked = [
            client.track(ack, until="settled", poll_interval=0.2, max_interval=0.5, timeout=120)
            for ack in acks
        ]

        async def drain(tracker: CampaignTracker) -> int:
            return sum([1 async for _ in tracker])

        cpu, wall = time.process_time(), time.perf_counter()
        changes = sum(await asyncio.gather(*(drain(t) for t in tracked)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        sampling = False
        await sampler
    polls = sum(t.stats.polls for t in tracked)
    return Row(
        f"9 {trackers} concurrent trackers on one client (pool of {POOL})",
        None,
        None,
        notes=(
            f"(peak open connections {peak} <= {POOL}: {'yes' if peak <= POOL else 'NO'}; "
            f"{polls:,} polls, {cpu / polls * 1e3:.2f} ms CPU per poll of {users} deployments)"
        ),
        figures={
            "peak_connections": peak,
            "pool_limit": POOL,
            "polls": polls,
            "changes": changes,
            "cpu_ms_per_poll": cpu / polls * 1e3,
            "wall_s": wall,
        },
    )


def run(quick: bool) -> list[Row]:
    trackers, users = (20, 5) if quick else (200, 20)
    with running("--speed", "20", module="campaignkit.sandbox") as root:
        row = asyncio.run(measure(root, trackers, users))
    assert row.figures["peak_connections"] <= POOL, row
    return [row]
