"""Row 14: webhook events per second through ``webhook_handler`` against a
bare aiohttp handler that parses the same JSON and answers the same body, both
served by one process of their own (``benchmarks/_webhook_server.py``) on
loopback; every event is distinct (none is a repeat)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import orjson

from ._floor_server import running
from ._harness import Row, ab_async, throughput_ratio

HEADERS = {"Content-Type": "application/json"}


def bodies(count: int, offset: int) -> list[bytes]:
    """``count`` distinct response events, as the service sends them."""
    return [
        orjson.dumps(
            {
                "country_code": "+57",
                "cellphone": "3161234567",
                "session_id": f"s-{offset + i}",
                "conversation_id": str(offset + i),
                "question": {"type": "open", "text": "What is your id number?", "answers": []},
                "sent_at": "2019-01-01 00:00:00",
                "responded_at": "2019-01-01 00:00:05",
                "sent_text": "What is your id number?",
                "actual_response": "1020304050",
                "classified_answer": {"text": "1020304050"},
                "user_session_keys": [{"key": "name", "value": "Juan", "type": None}],
            }
        )
        for i in range(count)
    ]


async def measure(base: str, total: int, rounds: int, concurrency: int) -> Row:
    used = 0

    def post_all(http: aiohttp.ClientSession, url: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            nonlocal used
            queue = bodies(total, used)
            used += total

            async def worker() -> None:
                while queue:
                    async with http.post(url, data=queue.pop(), headers=HEADERS) as response:
                        assert response.status == 200, response.status
                        await response.read()

            await asyncio.gather(*(worker() for _ in range(concurrency)))

        return run

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as http:
        floor, sdk = await ab_async(
            post_all(http, f"{base}/raw"), post_all(http, f"{base}/webhook"), rounds
        )
    return throughput_ratio(
        f"14 webhook events through webhook_handler ({total:,}, concurrency {concurrency})",
        floor,
        sdk,
        0.8,
        figures={"sdk_events_per_s": total / sdk.median, "raw_events_per_s": total / floor.median},
    )


def run(quick: bool) -> list[Row]:
    with running(module="benchmarks._webhook_server") as base:
        return [asyncio.run(measure(base, 200 if quick else 4_000, 2 if quick else 7, 16))]
