"""Rows 3 and 4: many small ``get_campaign_status`` calls on one client against
a raw aiohttp session + ``orjson.loads`` on the same server, concurrently and
one after the other."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import orjson

from campaignkit import CampaignClient

from ._floor_server import running
from ._harness import Row, ab_async, throughput_ratio

Call = Callable[[], Awaitable[object]]


async def in_batches(call: Call, total: int, concurrency: int) -> None:
    """``total`` calls with at most ``concurrency`` in flight."""

    async def worker(count: int) -> None:
        for _ in range(count):
            await call()

    share, extra = divmod(total, concurrency)
    await asyncio.gather(*(worker(share + (i < extra)) for i in range(concurrency)))


async def measure(base: str, total: int, rounds: int) -> list[Row]:
    url = f"{base}/campaign/v2/send-campaign/L1"
    connector = aiohttp.TCPConnector(limit=100)
    async with (
        aiohttp.ClientSession(connector=connector) as raw,
        CampaignClient("bench-key", campaign_url=f"{base}/campaign") as client,
    ):

        async def floor_call() -> object:
            async with raw.get(url, headers={"Authorization": "bench-key"}) as response:
                return orjson.loads(await response.read())

        async def sdk_call() -> object:
            return await client.get_campaign_status("L1")

        rows = []
        for label, concurrency, row_id in (("concurrency 64", 64, 3), ("sequential", 1, 4)):
            floor, sdk = await ab_async(
                lambda c=concurrency: in_batches(floor_call, total, c),  # type: ignore[misc]
                lambda c=concurrency: in_batches(sdk_call, total, c),  # type: ignore[misc]
                rounds,
            )
            rows.append(
                throughput_ratio(
                    f"{row_id} {total:,} small get_campaign_status, {label}",
                    floor,
                    sdk,
                    0.90,
                    figures={
                        "sdk_calls_per_s": total / sdk.median,
                        "raw_calls_per_s": total / floor.median,
                    },
                )
            )
        return rows


def run(quick: bool) -> list[Row]:
    with running() as base:
        return asyncio.run(measure(base, 200 if quick else 5_000, 2 if quick else 5))
