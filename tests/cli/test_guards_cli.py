"""The guards from the command line, against the sandbox: --cooldown with
its units, --dry-run (nothing sent), --max-recipients, --breaker, and
--confirm-over refused off a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import first_poll, run, users_rows, write_csv

from campaignkit.ledger import SqliteLedger
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)


async def sent_count(sb: Sandbox) -> int:
    launches = (await sb.snapshot())["companies"][0]["launches"]
    return sum(len(launch["users"]) for launch in launches)


async def test_cooldown_and_dry_run_from_the_command_line(
    sb: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    poll = str(await first_poll(sb))
    journal = str(tmp_path / "journal.sqlite")
    first = write_csv(tmp_path / "first.csv", users_rows(3))
    everyone = write_csv(tmp_path / "everyone.csv", users_rows(6))
    base = ["--bulk", "--journal", journal]
    done = await run(sb, "send", poll, str(first), *base, "--run", "monday")
    assert done.code == 0, done.err
    argv = ["send", poll, str(everyone), *base, "--run", "tuesday", "--cooldown", "24h"]
    dry = await run(sb, *argv, "--dry-run")
    assert "dry run: nothing was sent" in dry.out
    assert "3 users would be sent in 1 request" in dry.out
    assert "accepted in" not in dry.out  # no campaign was accepted
    assert "deferred (cooldown), not sent: 3 users" in dry.err
    assert await sent_count(sb) == 3
    real = await run(sb, *argv, "--json")
    assert real.json()["deferred_reasons"] == {"cooldown": 3}
    assert real.json()["counts"]["accepted"] == 3
    assert await sent_count(sb) == 6
    bare = await run(sb, *argv[:-1], "24")
    assert bare.code == 2
    assert "h (hours)" in bare.err + capsys.readouterr().err  # argparse's own usage error


async def test_max_recipients_breaker_and_confirm_over(
    sb: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    poll = str(await first_poll(sb))
    path = write_csv(tmp_path / "users.csv", users_rows(6))
    journal = str(tmp_path / "journal.sqlite")
    over = await run(sb, "send", poll, str(path), "--bulk", "--max-recipients", "5")
    assert over.code == 2, over.err
    assert "max_recipients" in over.err
    assert await sent_count(sb) == 0
    bad = await run(sb, "send", poll, str(path), "--bulk", "--breaker", "20%")
    assert bad.code == 2
    assert "SHARE/N" in bad.err + capsys.readouterr().err
    ok = await run(
        sb, "send", poll, str(path), "--bulk", "--journal", journal, "--breaker", "0.2/500"
    )
    assert ok.code == 0, ok.err
    asks = await run(sb, "send", poll, str(path), "--bulk", "--confirm-over", "3")
    assert asks.code == 2
    assert "--confirm-over asks on a terminal" in asks.err
    single = await run(sb, "send", poll, str(path), "--dry-run")
    assert "--dry-run needs --bulk" in single.err


async def test_a_canary_from_the_command_line(
    sb: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    poll = str(await first_poll(sb))
    path = write_csv(tmp_path / "users.csv", users_rows(6))
    journal = str(tmp_path / "journal.sqlite")
    alone = await run(sb, "send", poll, str(path), "--bulk", "--canary-wait", "1m")
    assert alone.code == 2
    assert "--canary-wait need --canary N" in alone.err
    bad = await run(sb, "send", poll, str(path), "--bulk", "--canary", "2", "--canary-wait", "60")
    assert bad.code == 2
    assert "m (minutes)" in bad.err + capsys.readouterr().err
    share = ["--canary", "2", "--canary-max-failed", "5%"]
    worse = await run(sb, "send", poll, str(path), "--bulk", *share)
    assert worse.code == 2
    assert "share from 0 to 1" in worse.err + capsys.readouterr().err
    argv = ["--journal", journal, "--run", "r", "--canary", "2", "--canary-wait", "30s"]
    ok = await run(sb, "send", poll, str(path), "--bulk", *argv, "--canary-min-delivered", "0.5")
    assert ok.code == 0, ok.err
    launches = (await sb.snapshot())["companies"][0]["launches"]
    assert [len(launch["users"]) for launch in launches] == [2, 4]
    async with SqliteLedger(journal) as ledger:
        assert (await ledger.run_options("r"))["canary"] == {
            "size": 2,
            "wait": 30.0,
            "min_delivered": 0.5,
            "max_failed": 0.05,
        }
