"""``campaignkit runs`` shows a paused run (who paused it, its figures, the
command that resumes it) and ``runs RUN --resume`` resumes it."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from helpers.cli import run
from helpers.ledgers import people

from campaignkit import Breaker, Canary
from campaignkit._guards import guard_options
from campaignkit.ledger import SqliteLedger

pytestmark = pytest.mark.timeout(60)


async def paused_ledger(path: Path) -> None:
    async with SqliteLedger(path) as ledger:
        await ledger.start_run("spring", "7")
        await ledger.plan("spring", "c1", people(4))
        await ledger.pause_run("spring", "breaker", "60% of 500 settled recipients failed (300)")


async def test_runs_shows_a_pause_with_its_figures_and_the_resume_command(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "ledger.db"
    await paused_ledger(journal)
    resume = f"campaignkit runs spring --journal {journal} --resume"
    for argv in (["runs"], ["runs", "spring"]):
        shown = await run(None, *argv, "--journal", str(journal))
        assert shown.code == 0, shown.err
        assert "run spring paused by the breaker at " in shown.out
        assert "60% of 500 settled recipients failed (300)" in shown.out
        assert resume in shown.out
    listed = await run(None, "--json", "runs", "spring", "--journal", str(journal))
    found = json.loads(listed.out)
    assert found["paused"]["reason"] == "breaker"
    assert found["resume"] == resume


async def test_runs_resume_resumes_and_says_how_its_planned_users_go_out(tmp_path: Path) -> None:
    journal = tmp_path / "ledger.db"
    await paused_ledger(journal)
    resumed = await run(None, "runs", "spring", "--journal", str(journal), "--resume")
    assert resumed.code == 0, resumed.err
    assert "run spring resumed: 4 users planned" in resumed.out
    assert "campaignkit submit 7 FILE --broker BROKER" in resumed.out
    async with SqliteLedger(journal) as ledger:
        info = await ledger.run_info("spring")
        assert info is not None
        assert info.paused is None
        assert await ledger.claim("spring", "c1") is not None
    again = await run(None, "runs", "spring", "--journal", str(journal), "--resume")
    assert "run spring was not paused" in again.out
    usage = await run(None, "runs", "--journal", str(journal), "--resume")
    assert usage.code == 2
    assert "--resume needs a RUN" in usage.err


async def test_runs_shows_each_guard_of_the_run_as_the_command_line_gives_it(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "ledger.db"
    await paused_ledger(journal)
    canary = Canary(size=200, wait=timedelta(minutes=15), min_delivered=0.8, max_failed=0.05)
    guards = guard_options(Breaker(max_failed=0.2, over=500), timedelta(hours=30), True, canary)
    async with SqliteLedger(journal) as ledger:
        await ledger.save_run_options("spring", guards)
    shown = await run(None, "runs", "spring", "--journal", str(journal))
    words = (
        "guards: cooldown 1d6h, skip open conversations, breaker 0.2/500, "
        "canary 200 (wait 15m, min delivered 0.8, max failed 0.05)"
    )
    assert words in shown.out
    listed = await run(None, "--json", "runs", "spring", "--journal", str(journal))
    assert json.loads(listed.out)["guards"][2] == "breaker 0.2/500"
