"""Row 17: ``send_bulk`` of 100,000 users over each ledger (memory, SQLite,
PostgreSQL) against a raw aiohttp chunked sender (chunks of 1,000,
concurrency 4), side by side in one run, all to one local server that parses
each body and answers as the service does (``python -m
benchmarks.bench_ledgers --serve``, its own process). Throughput ratios,
higher is better; the issue's budgets: memory >= 0.40x, SQLite >= 0.20x,
PostgreSQL >= 0.15x.

The PostgreSQL row needs ``CAMPAIGNKIT_TEST_POSTGRES_DSN`` (default: the
local server, database ``test``); without a server it is left out, said in
one line."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

from campaignkit import CampaignClient, User
from campaignkit.ledger import Ledger, MemoryLedger, PostgresLedger, SqliteLedger

from ._floor_server import running
from ._harness import Row, Timing, throughput_ratio

CHUNK = 1000
CONCURRENCY = 4
KEY = "bench-key"
POLL = "bench-poll"
DSN = os.environ.get("CAMPAIGNKIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
BUDGETS = {"memory": 0.40, "sqlite": 0.20, "postgres": 0.15}


def users(count: int, offset: int) -> list[User]:
    return [
        User(cellphone=f"3{i:09d}", country_code="+57", user_session_keys={"n": str(i)})
        for i in range(offset, offset + count)
    ]


def raw_dict(user: User) -> dict[str, object]:
    return {
        "cellphone": user.cellphone,
        "country_code": user.country_code,
        "user_session_keys": [{"key": k.key, "value": k.value} for k in user.user_session_keys],
    }


async def raw_chunked(url: str, batch: list[User]) -> None:
    """The floor: the same users POSTed in chunks with raw aiohttp, no checks."""
    headers = {"Authorization": KEY, "Content-Type": "application/json"}
    queue: asyncio.Queue[list[User] | None] = asyncio.Queue(CONCURRENCY)
    async with aiohttp.ClientSession() as raw:

        async def reader() -> None:
            for start in range(0, len(batch), CHUNK):
                await queue.put(batch[start : start + CHUNK])
            for _ in range(CONCURRENCY):
                await queue.put(None)

        async def sender() -> None:
            while (chunk := await queue.get()) is not None:
                body = orjson.dumps({"users": [raw_dict(u) for u in chunk]})
                async with raw.post(
                    f"{url}/v2/send-campaign/{POLL}", data=body, headers=headers
                ) as r:
                    orjson.loads(await r.read())
                    if r.status != 202:
                        raise RuntimeError(f"raw send answered {r.status}")

        await asyncio.gather(reader(), *(sender() for _ in range(CONCURRENCY)))


@asynccontextmanager
async def postgres_schema() -> AsyncIterator[str | None]:
    """A DSN on a new schema, dropped afterwards; None without a server."""
    import asyncpg

    try:
        conn = await asyncpg.connect(DSN, timeout=5)
    except (OSError, asyncpg.PostgresError):
        yield None
        return
    schema = f"ck_bench_{uuid.uuid4().hex[:12]}"
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
        separator = "&" if "?" in DSN else "?"
        yield f"{DSN}{separator}options=-csearch_path%3D{schema}"
    finally:
        await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        await conn.close()


async def measure(url: str, total: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per round of each side, the sides interleaved round by round."""
    samples: dict[str, list[float]] = {"raw": [], "memory": [], "sqlite": []}
    offset = 0
    with tempfile.TemporaryDirectory() as tmp:
        async with postgres_schema() as dsn, CampaignClient(KEY, campaign_url=url) as client:
            if dsn is not None:
                samples["postgres"] = []
            else:
                print(
                    f"# bench_ledgers: no PostgreSQL at {DSN}: its row is left out", file=sys.stderr
                )

            def ledger_of(side: str, round_: int) -> Ledger:
                if side == "memory":
                    return MemoryLedger()
                if side == "sqlite":
                    return SqliteLedger(Path(tmp, f"run{round_}.db"))
                assert dsn is not None
                return PostgresLedger(dsn)

            async def sdk(side: str, round_: int, batch: list[User]) -> None:
                run = f"bench-{round_}"
                async with ledger_of(side, round_) as ledger:
                    report = await client.send_bulk(
                        POLL,
                        batch,
                        chunk_size=CHUNK,
                        concurrency=CONCURRENCY,
                        journal=ledger,
                        run=run,
                    )
                if report.counts["accepted"] != len(batch):
                    raise RuntimeError(f"send_bulk over {side} did not complete: {report!r}")

            for round_ in range(rounds + 1):  # the first round warms up every path
                for side in samples:
                    offset += total
                    batch = users(total, offset)
                    started = time.perf_counter()
                    if side == "raw":
                        await raw_chunked(url, batch)
                    else:
                        await sdk(side, round_, batch)
                    if round_:
                        samples[side].append(time.perf_counter() - started)
    return samples


def run(quick: bool) -> list[Row]:
    total = 2_000 if quick else 100_000
    rounds = 1 if quick else 3
    with running("--serve", module="benchmarks.bench_ledgers") as url:
        samples = asyncio.run(measure(url, total, rounds))
    raw = Timing.of(samples.pop("raw"))
    names = {
        "memory": "a MemoryLedger",
        "sqlite": "an SqliteLedger",
        "postgres": "a PostgresLedger",
    }
    return [
        throughput_ratio(
            f"17{'abc'[index]} send_bulk of {total:,} users over {names[side]} vs a raw aiohttp "
            f"chunked sender (chunks of {CHUNK}, concurrency {CONCURRENCY}), to a local server "
            "parsing each body",
            raw,
            Timing.of(taken),
            BUDGETS[side],
            figures={"users": total, "users_per_s": total / Timing.of(taken).median},
        )
        for index, (side, taken) in enumerate(samples.items())
    ]


def app() -> web.Application:
    """Answers a send as the service does, after parsing its body."""
    launches = 0

    async def send(request: web.Request) -> web.Response:
        nonlocal launches
        users = orjson.loads(await request.read())["users"]
        if not users:
            return web.Response(status=400)
        launches += 1
        body = {
            "message": "queued",
            "id": request.match_info["poll_id"],
            "batch_id": f"b{launches}",
            "launch_request_id": f"l{launches}",
            "status_url": f"/v2/send-campaign/l{launches}",
        }
        return web.Response(body=orjson.dumps(body), status=202, content_type="application/json")

    served = web.Application(client_max_size=64 * 1024 * 1024)
    served.router.add_post("/v2/send-campaign/{poll_id}", send)
    return served


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    if args.serve:
        web.run_app(app(), host="127.0.0.1", port=args.port, print=None, access_log=None)
        return
    for row in run(quick=False):
        print(row.name, f"{row.ratio:.3f}x", row.figures)


if __name__ == "__main__":
    main()
