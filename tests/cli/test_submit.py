"""``campaignkit submit`` streams a file into a run that a real ``campaignkit
worker`` process sends, on the real Redis and PostgreSQL and the sandbox."""

from __future__ import annotations

import asyncio
import shlex
import sys
from pathlib import Path

import asyncpg
import orjson
import pytest
from helpers.cli import SCRIPT, first_poll, run, sandbox_env, users_rows, write_csv
from helpers.processes import run_process
from helpers.workers import unique_name, worker_process

from campaignkit.cli.context import ExitStatus
from campaignkit.ledger import ACCEPTED, IN_FLIGHT, PLANNED, PostgresLedger
from campaignkit.ledger._postgres import redact_dsn
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(90)

USERS = 500


async def test_submit_streams_a_file_into_a_run_that_a_worker_sends(
    sb: Sandbox, tmp_path: Path, postgres_dsn: str, redis_url: str
) -> None:
    queue = unique_name("ck-submit-")
    rows = users_rows(USERS)
    rows[10]["cellphone"] = "300 12"  # invalid: too short
    rows.append(dict(rows[3]))  # a repeated phone
    users = write_csv(tmp_path / "users.csv", rows)
    poll = str(await first_poll(sb))
    async with worker_process(sb, redis_url, queue, postgres_dsn, "--concurrency", "2") as worker:
        argv = ["submit", poll, str(users), "--broker", redis_url, "--journal", postgres_dsn]
        argv += ["--queue", queue, "--run", "spring sale", "--chunk-size", "50"]
        submitted = await run_process(str(SCRIPT), *argv, env=sandbox_env(sb), timeout=60)
        assert submitted.code == 0, submitted.err
        assert "run spring sale: submitted for the workers" in submitted.out
        # How to watch it: a command that works, the run's name quoted.
        watch = submitted.err.split("watch it with:\n", 1)[1].splitlines()[0]
        assert shlex.split(watch)[1:] == ["runs", "spring sale", "--journal", postgres_dsn]
        async with PostgresLedger(postgres_dsn) as ledger:
            for _ in range(600):
                counts = await ledger.counts("spring sale")
                if counts[ACCEPTED] == USERS - 1:
                    break
                await asyncio.sleep(0.05)
            report = await ledger.report("spring sale")
        assert await worker.stop() == 0
    assert counts[PLANNED] == counts[IN_FLIGHT] == 0
    assert report.counts["accepted"] == USERS - 1
    assert (report.counts["invalid"], report.counts["duplicate"]) == (1, 1)
    assert report.total == USERS + 1  # every input accounted for
    assert worker.count("run spring sale chunk ") == USERS // 50
    received: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    assert len(received) == USERS - 1
    assert max(received.values()) == 1

    shown = await run(None, "runs", "spring sale", "--journal", postgres_dsn, "--json")
    assert shown.code == 0, shown.err
    assert shown.json()["counts"]["accepted"] == USERS - 1


async def test_submit_says_what_is_wrong_before_anything_is_planned(
    sb: Sandbox, tmp_path: Path, postgres_dsn: str, redis_url: str
) -> None:
    users = write_csv(tmp_path / "users.csv", users_rows(3))
    queue = ["--queue", unique_name("ck-submit-")]
    base = ["submit", "7", str(users), "--broker", redis_url, "--journal", postgres_dsn, *queue]
    missing = await run(None, *base[:3], "--journal", postgres_dsn, *queue)
    assert missing.code == 2  # argparse's usage error: --broker is required
    absent = await run(None, "submit", "7", str(tmp_path / "nope.csv"), *base[3:])
    assert absent.code == 2
    assert "no such file" in absent.err
    bad = await run(None, *base, "--chunk-size", "0")
    assert bad.code == 2
    as_json = orjson.loads((await run(None, *base, "--json", "--run", "r1", "--create")).out)
    assert as_json["run"] == "r1"
    assert as_json["counts"][PLANNED] == 3


async def test_a_resumed_submit_never_creates_its_ledger(
    sb: Sandbox, tmp_path: Path, postgres_dsn: str, redis_url: str
) -> None:
    """A submit given a ledger that does not exist (a mistyped --journal of a
    run being resumed) plans nobody and creates nothing; --create makes a
    first run's ledger, and its first line says so."""
    users = write_csv(tmp_path / "users.csv", users_rows(3))
    queue = ["--queue", unique_name("ck-submit-")]
    base = ["submit", "7", str(users), "--broker", redis_url, "--journal", postgres_dsn, *queue]
    resumed = await run(None, *base, "--run", "spring")
    assert resumed.code == ExitStatus.NO_LEDGER, resumed.err
    assert f"no ledger in {redact_dsn(postgres_dsn)}: its schema 'ck_test_" in resumed.err
    assert "holds no campaignkit tables" in resumed.err
    assert not await ledger_tables(postgres_dsn)
    first = await run(None, *base, "--run", "spring", "--create")
    assert first.code == 0, first.err
    assert first.err.startswith("campaignkit: new ledger created: PostgresLedger(")
    again = await run(None, *base, "--run", "spring")
    assert again.code == 0, again.err
    assert "new ledger" not in again.err


async def ledger_tables(dsn: str) -> list[str]:
    """The campaignkit tables of ``dsn``'s schema."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_name LIKE 'campaignkit%'"
        )
    finally:
        await conn.close()
    return [row[0] for row in rows]


async def test_submit_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "taskiq", None)  # what `import taskiq` finds uninstalled
    monkeypatch.delitem(sys.modules, "campaignkit.workers", raising=False)
    argv = ("submit", "7", "users.csv", "--broker", "redis://127.0.0.1:1", "--journal", "x.db")
    result = await run(None, *argv)
    assert result.code == 3, result.err
    assert "campaignkit submit needs the 'workers' extra" in result.err


async def test_submit_with_a_canary_returns_once_it_is_judged(
    sb: Sandbox, tmp_path: Path, postgres_dsn: str, redis_url: str
) -> None:
    """``submit --canary`` hands the canary alone to the worker and waits for
    its verdict: one that fails leaves the run paused, says how to resume
    it, and exits 6 (the rest planned, never enqueued)."""
    queue = unique_name("ck-submit-")
    await sb.fail_prefix("+57300", rate=1.0, status="FAILURE_BY_META_CHOSE_NOT_DELIVER")
    users = write_csv(tmp_path / "users.csv", users_rows(30))
    poll = str(await first_poll(sb))
    base = ["submit", poll, str(users), "--broker", redis_url, "--journal", postgres_dsn]
    base += ["--queue", queue, "--run", "r", "--chunk-size", "5"]
    alone = await run(sb, *base, "--canary-max-failed", "0.1")
    assert alone.code == 2
    assert "--canary-max-failed need --canary N" in alone.err
    async with worker_process(sb, redis_url, queue, postgres_dsn, "--concurrency", "2"):
        canary = ["--canary", "10", "--canary-wait", "30s", "--canary-max-failed", "0.1"]
        submitted = await run(sb, *base, *canary)
    assert submitted.code == ExitStatus.PARTIAL, submitted.err
    assert "run r paused by the canary at " in submitted.err
    # Judged as soon as the failures pass the share: some may not have settled yet.
    assert "of 10 canary recipients failed" in submitted.err
    assert "over the canary's max_failed of 0.1" in submitted.err
    assert shlex.join(["campaignkit", "runs", "r", "--journal", postgres_dsn, "--resume"]) in (
        submitted.err
    )
    received: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    assert len(received) == 10
    async with PostgresLedger(postgres_dsn) as ledger:
        counts = await ledger.counts("r")
        assert (counts[ACCEPTED], counts[PLANNED]) == (10, 20)
        assert (await ledger.run_options("r"))["canary"]["max_failed"] == 0.1
