"""The issue's distributed check: 200,000 users, 1 producer, 4 ``campaignkit
worker`` processes against the sandbox answering each send 50 ms late; one
worker is killed with SIGKILL mid-run and restarted. Then the sandbox's
snapshot must show nobody received twice, and the report must account for
every user (the dead worker's chunks as ambiguous once their claims expire).

    python -m benchmarks.soak_workers [--users 200000] [--chunk-size 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections import Counter

import aiohttp

from campaignkit import CampaignClient

from .bench_bulk import sandbox
from .bench_workers import Worker, fresh_users, ledger_schema, producer, set_latency

CLAIM_TTL = 10.0


async def soak(users: int, chunk_size: int, concurrency: int) -> dict[str, object]:
    queue = f"campaignkit-soak-{uuid.uuid4().hex[:8]}"
    with sandbox() as urls:
        await set_latency(urls, 0.05)
        async with (
            ledger_schema() as dsn,
            CampaignClient(urls["api_key"], base_url=urls["base_url"]) as client,
        ):
            poll = (await client.list_polls())[0].id
            workers = [
                await Worker.start(urls, dsn, queue, concurrency=concurrency, claim_ttl=CLAIM_TTL)
                for _ in range(4)
            ]
            async with producer(dsn, queue) as bulk:
                started = time.perf_counter()
                submit = asyncio.create_task(
                    bulk.submit(poll, fresh_users(users), run=queue, chunk_size=chunk_size)
                )
                killed_at = await bulk.counts(queue)  # zeros until submit starts the run
                while killed_at["accepted"] < users // 3:
                    await asyncio.sleep(0.05)
                    killed_at = await bulk.counts(queue)
                workers[0].kill()
                await workers[0].process.wait()
                workers[0] = await Worker.start(
                    urls, dsn, queue, concurrency=concurrency, claim_ttl=CLAIM_TTL
                )
                await submit
                produced = time.perf_counter() - started
                report = await bulk.wait(queue, poll_interval=0.5)
                elapsed = time.perf_counter() - started
            for worker in workers:
                await worker.stop()
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{urls['admin_url']}/state", params={"users": "1"}) as response,
        ):
            state = await response.json()
    phone_counts: dict[str, int] = state["companies"][0]["phone_counts"]
    received = Counter(phone_counts.values())
    counts = report.counts
    accounted = sum(counts.values())
    ok = (
        max(phone_counts.values()) == 1
        and accounted == users == report.total
        and counts["accepted"] <= len(phone_counts) <= counts["accepted"] + counts["ambiguous"]
    )
    return {
        "users": users,
        "chunk_size": chunk_size,
        "worker_concurrency": concurrency,
        "claim_ttl_s": CLAIM_TTL,
        "counts_when_killed": killed_at,
        "report_counts": counts,
        "report_total": report.total,
        "phones_received": len(phone_counts),
        "receptions_per_phone": dict(received),
        "producer_s": round(produced, 2),
        "elapsed_s": round(elapsed, 2),
        "users_per_s": round(users / elapsed),
        "nobody_twice_and_all_accounted": ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak_workers")
    parser.add_argument("--users", type=int, default=200_000)
    parser.add_argument("--chunk-size", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=2, help="chunks at a time per worker")
    args = parser.parse_args()
    result = asyncio.run(soak(args.users, args.chunk_size, args.concurrency))
    for name, value in result.items():
        print(f"{name}: {value}")
    if not result["nobody_twice_and_all_accounted"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
