"""A run whose planned chunks no worker claims (the broker lost its
messages) is shown stalled by ``campaignkit runs`` and the dashboard's run
row, with the command that hands them over again; that command completes
it, nobody sent twice. On the real Redis and PostgreSQL and the sandbox."""

from __future__ import annotations

import asyncio
import shlex
from html import escape
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio
from helpers.cli import first_poll, run, users_rows, write_csv
from helpers.servers import serving
from helpers.workers import unique_name, worker_process

from campaignkit.dashboard import Dashboard, dashboard_app
from campaignkit.ledger import ACCEPTED, PLANNED, PostgresLedger
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(90)

FIRST, MORE = 60, 90


async def settle(dsn: str, run_name: str, accepted: int) -> dict[str, int]:
    async with PostgresLedger(dsn) as ledger:
        for _ in range(600):
            counts = await ledger.counts(run_name)
            if counts[ACCEPTED] == accepted:
                break
            await asyncio.sleep(0.05)
    return counts


async def test_a_run_the_broker_lost_is_stalled_and_its_command_completes_it_once(
    sb: Sandbox, tmp_path: Path, postgres_dsn: str, redis_url: str
) -> None:
    queue = unique_name("ck-stall-")
    poll = str(await first_poll(sb))
    first = write_csv(tmp_path / "first.csv", users_rows(FIRST))
    everyone = write_csv(tmp_path / "everyone.csv", users_rows(FIRST + MORE))
    base = ["--broker", redis_url, "--journal", postgres_dsn, "--queue", queue]
    name = "spring sale's"  # quoted in the command
    async with worker_process(sb, redis_url, queue, postgres_dsn) as worker:
        sent = await run(None, "submit", poll, str(first), *base, "--run", name)
        assert sent.code == 0, sent.err
        assert (await settle(postgres_dsn, name, FIRST))[ACCEPTED] == FIRST
        assert await worker.stop() == 0
    # No worker: the rest is planned and enqueued, then the broker loses it.
    more = await run(
        None, "submit", poll, str(everyone), *base, "--run", name, "--chunk-size", "20"
    )
    assert more.code == 0, more.err
    conn = redis.asyncio.from_url(redis_url)
    try:
        assert await conn.delete(queue) == 1
    finally:
        await conn.aclose()

    shown = ["runs", name, "--journal", postgres_dsn]
    waiting = await run(None, *shown, "--json")
    assert waiting.code == 0, waiting.err
    assert (waiting.json()["stalled"], waiting.json()["stalled_since"]) == (False, None)
    await asyncio.sleep(0.6)
    stalled = await run(None, *shown, "--stall-after", "0.5")
    assert stalled.code == 0, stalled.err
    assert f"run {name} stalled: {MORE} planned users unclaimed since" in stalled.out
    command = stalled.out.split("first submit:\n", 1)[1].splitlines()[0].strip()
    as_json = (await run(None, *shown, "--stall-after", "0.5", "--json")).json()
    assert as_json["stalled"] is True
    assert as_json["stalled_since"].startswith("20")
    assert as_json["hand_over"] == command
    listed = await run(None, "runs", "--journal", postgres_dsn, "--stall-after", "0.5")
    assert command in listed.out
    async with sb.client() as client, PostgresLedger(postgres_dsn) as ledger:
        dashboard = Dashboard(client, ledger=ledger, journal=postgres_dsn, stall_after=0.5)
        async with (
            serving(dashboard_app(dashboard)) as url,
            aiohttp.ClientSession() as http,
            http.get(f"{url}/") as page,
        ):
            row = await page.text()
    assert f"<b>stalled</b>: {MORE} planned recipients no worker has claimed since" in row
    assert f"<pre><code>{escape(command)}</code></pre>" in row

    argv = shlex.split(command)
    assert argv[:2] == ["campaignkit", "submit"]
    assert argv[argv.index("--run") + 1] == name
    assert argv[argv.index("--journal") + 1] == postgres_dsn
    argv = [
        str(everyone) if arg == "FILE" else redis_url if arg == "BROKER" else arg for arg in argv
    ]
    async with worker_process(sb, redis_url, queue, postgres_dsn) as worker:
        handed = await run(None, *argv[1:], "--queue", queue)
        assert handed.code == 0, handed.err
        counts = await settle(postgres_dsn, name, FIRST + MORE)
        assert await worker.stop() == 0
    assert (counts[ACCEPTED], counts[PLANNED]) == (FIRST + MORE, 0)
    received: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    assert len(received) == FIRST + MORE
    assert max(received.values()) == 1  # nobody twice
    done = await run(None, *shown, "--stall-after", "0.5", "--json")
    assert done.json()["stalled"] is False
