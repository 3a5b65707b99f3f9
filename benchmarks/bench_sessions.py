"""Row 7: ``iter_sessions`` over many sessions in pages of 10,000 against a raw
aiohttp paging loop + ``orjson.loads``; and the peak RSS growth while paging."""

from __future__ import annotations

import asyncio
import os

import aiohttp
import orjson

from campaignkit import CampaignClient

from ._floor_server import running
from ._harness import Row, ab_async, throughput_ratio

PAGE = 10_000


def rss_mb() -> float:
    """This process's resident memory now (Linux): the process-wide peak
    (``ru_maxrss``) would hide this benchmark behind the ones run before it."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def measure(base: str, total: int, rounds: int) -> list[Row]:
    url = f"{base}/main/devapi/poll/7/sessions"
    async with (
        aiohttp.ClientSession() as raw,
        CampaignClient("bench-key", base_url=f"{base}/main") as client,
    ):

        async def floor() -> int:
            seen, cursor = 0, ""
            while True:
                query = {"limit": str(PAGE), **({"after": cursor} if cursor else {})}
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

        async def sdk_sampling_rss() -> tuple[int, float]:
            seen, peak = 0, rss_mb()
            async for _ in client.iter_sessions(7, page_size=PAGE):
                seen += 1
                if seen % PAGE == 0:
                    peak = max(peak, rss_mb())
            return seen, peak

        before = rss_mb()
        seen, peak = await sdk_sampling_rss()
        assert seen == total
        growth = peak - before
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
