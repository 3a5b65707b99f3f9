"""Row 17: ``send_bulk`` of 100,000 users over each ledger (memory, SQLite,
PostgreSQL) against a raw aiohttp chunked sender (chunks of 1,000,
concurrency 4), side by side in one run, all to one local server that parses
each body and answers as the service does (``bench_bulk``'s stub, its own
process). Throughput ratios, higher is better; the issue's budgets: memory
>= 0.40x, SQLite >= 0.20x, PostgreSQL >= 0.15x.

The PostgreSQL row needs ``CAMPAIGNKIT_TEST_POSTGRES_DSN`` (default: the
local server, database ``test``); without a server it is left out, said in
one line."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from campaignkit import CampaignClient, User
from campaignkit.ledger import Ledger, MemoryLedger, PostgresLedger, SqliteLedger

from ._floor_server import running
from ._harness import Row, Timing, throughput_ratio
from .bench_bulk import CHUNK, CONCURRENCY, _raw_stream, make_users

KEY = "bench-key"
POLL = "bench-poll"
DSN = os.environ.get("CAMPAIGNKIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
BUDGETS = {"memory": 0.40, "sqlite": 0.20, "postgres": 0.15}


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
                    batch = make_users(total, offset)
                    started = time.perf_counter()
                    if side == "raw":
                        await _raw_stream(f"{url}/v2/send-campaign/{POLL}", KEY, iter(batch))
                    else:
                        await sdk(side, round_, batch)
                    if round_:
                        samples[side].append(time.perf_counter() - started)
    return samples


def run(quick: bool) -> list[Row]:
    total = 2_000 if quick else 100_000
    rounds = 1 if quick else 3
    with running(module="benchmarks.bench_bulk") as url:
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


def main() -> None:
    for row in run(quick=False):
        print(row.name, f"{row.ratio:.3f}x", row.figures)


if __name__ == "__main__":
    main()
