"""Row 7: ``iter_sessions`` over many sessions in pages of 10,000 against a raw
aiohttp paging loop + ``orjson.loads``; and the peak RSS growth while paging."""

from __future__ import annotations

import asyncio
import resource

import aiohttp
import orjson

from campaignkit import CampaignClient

from ._floor_server import running
from ._harness import Row, ab_async, throughput_ratio

PAGE = 10_000


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def measure(base: str, total: int, rounds: int) -> list[Row]:
    url = f"{base}/main/devapi/poll/7/sessions"
    async with (
        aiohttp.ClientSession() as raw,
        CampaignClient("bench-key", base_url=f"{base}/main") as client,
    ):

        async def floor() -> int:
            seen, cursor = 0, ""
            while True:
                query = {"limit": str(PAGE), **({"next_id": cursor} if cursor else {})}
                async with raw.get(
                    url, params=query, headers={"Authorization": "bench-key"}
                ) as response:
                    page = orjson.loads(await response.read())
                seen += len(page["results"])
                cursor = page["next_id"]
                if not cursor:
                    return seen

        async def sdk() -> int:
            return sum([1 async for _ in client.iter_sessions(7, page_size=PAGE)])

        before = peak_rss_mb()
        assert await sdk() == total
        growth = peak_rss_mb() - before
        floor_t, sdk_t = await ab_async(floor, sdk, rounds)
        return [
            throughput_ratio(
                f"7 iter_sessions over {total:,} sessions (pages of {PAGE:,})",
                floor_t,
                sdk_t,
                0.85,
                notes=f"(peak RSS growth {growth:.1f} MB)",
                figures={"peak_rss_growth_mb": growth, "sessions_per_s": total / sdk_t.median},
            )
        ]


def run(quick: bool) -> list[Row]:
    total = 30_000 if quick else 1_000_000
    with running("--sessions", str(total), "--page", str(PAGE)) as base:
        return asyncio.run(measure(base, total, 1 if quick else 3))
