"""Row 13: the dashboard serving a launch's page (its checks, the funnel, the
chart, the document) against raw aiohttp answering the same bytes from the
same process (``benchmarks/_dashboard_server.py``), as throughput of
sequential GETs of a 1,000-user campaign's page."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp

from ._floor_server import running
from ._harness import Row, ab_async, throughput_ratio


async def measure(raw_base: str, requests: int, rounds: int) -> list[Row]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{raw_base}/launch") as response:
            launch = await response.text()
        async with http.get(f"{raw_base}/dashboard") as response:
            dashboard_base = await response.text()

        def pages(base: str) -> Callable[[], Awaitable[int]]:
            async def get_all() -> int:
                size = 0
                for _ in range(requests):
                    async with http.get(f"{base}/launches/{launch}") as response:
                        size = len(await response.read())
                        response.raise_for_status()
                return size

            return get_all

        page_size = await pages(dashboard_base)()
        floor, sdk = await ab_async(pages(raw_base), pages(dashboard_base), rounds)
    per_page = sdk.median / requests * 1e3
    return [
        throughput_ratio(
            f"13 dashboard: {requests} sequential GETs of a launch page ({page_size:,} B) "
            "vs raw aiohttp answering the same bytes",
            floor,
            sdk,
            None,
            notes=f"({per_page:.2f} ms a page)",
            figures={"page_bytes": page_size, "ms_per_page": per_page},
        )
    ]


def run(quick: bool) -> list[Row]:
    users, requests, rounds = (100, 20, 3) if quick else (1000, 500, 7)
    with running("--users", str(users), module="benchmarks._dashboard_server") as base:
        return asyncio.run(measure(base, requests, rounds))
