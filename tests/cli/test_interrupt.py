"""``campaignkit send --bulk`` interrupted for real: a subprocess sent SIGINT
(or SIGTERM) while requests are under way settles them from their answers,
prints the command that resumes the run, and that command completes it,
nobody twice. Killed with SIGKILL, a rerun completes it too."""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys
from pathlib import Path

import orjson
import pytest
from helpers.cli import SCRIPT, first_poll, sandbox_env, users_rows, write_csv
from helpers.processes import Finished, run_process

from campaignkit.cli.interrupt import resume_command
from campaignkit.cli.parser import parse
from campaignkit.ledger import SqliteLedger
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(120)

USERS = 300
LATENCY = 1.0  # real seconds each send waits, after the sandbox took it, for its answer


async def sends_seen(sb: Sandbox) -> int:
    return int((await sb.admin("GET", "/faults"))["requests"].get("send_campaign", 0))


async def phone_counts(sb: Sandbox) -> dict[str, int]:
    counts: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    return counts


async def ledger_counts(journal: Path, run: str) -> dict[str, int]:
    async with SqliteLedger(journal) as ledger:
        return await ledger.counts(run)


async def interrupted(
    sb: Sandbox, argv: list[str], how: signal.Signals, program: tuple[str, ...] = (str(SCRIPT),)
) -> Finished:
    """Run ``campaignkit ARGV`` (or ``program``), signal it with ``how`` once
    requests are under way (some answered, more sent), and wait for it to end."""
    process = await asyncio.create_subprocess_exec(
        *program,
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=sandbox_env(sb),
    )
    try:
        # Eight sends seen: the first four answered, four more under way.
        for _ in range(600):
            if await sends_seen(sb) >= 8:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the send never got under way")
        process.send_signal(how)
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return Finished(process.returncode, out.decode(), err.decode())


def resume_argv(err: str) -> list[str]:
    lines = err.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("resume it"))
    argv = shlex.split(lines[at + 1])
    assert Path(argv[0]).name == "campaignkit"
    return argv[1:]


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM])
async def test_an_interrupted_send_settles_what_is_under_way_and_prints_how_to_resume(
    sb: Sandbox, tmp_path: Path, how: signal.Signals
) -> None:
    users = write_csv(tmp_path / "users list.csv", users_rows(USERS))
    journal = tmp_path / "run.db"
    poll = str(await first_poll(sb))
    await sb.set_faults({"kind": "latency", "route": "send_campaign", "seconds": LATENCY})
    argv = ["send", poll, str(users), "--bulk", "--journal", str(journal), "--run", "spring"]
    argv += ["--chunk-size", "10", "--concurrency", "4"]
    first = await interrupted(sb, argv, how)

    assert first.code == 130, first.err
    assert "interrupted:" in first.err
    # The requests under way were answered within the grace: none ambiguous.
    counts = await ledger_counts(journal, "spring")
    assert counts["in_flight"] == counts["ambiguous"] == 0
    assert 40 <= counts["accepted"] < USERS
    assert f"{counts['accepted']} accepted" in first.err
    # No request started after the signal.
    assert await sends_seen(sb) * 10 == counts["accepted"]
    # The command, file name with its space quoted; never the key.
    resume = resume_argv(first.err)
    assert resume[:3] == ["send", poll, str(users)]
    assert ["--journal", str(journal), "--run", "spring"] == resume[4:8]
    assert sb.api_key not in first.err + first.out

    await sb.clear_faults()
    again = await run_process(str(SCRIPT), *resume, env=sandbox_env(sb), timeout=60)
    assert again.code == 0, again.err
    sent = await phone_counts(sb)
    assert len(sent) == USERS
    assert set(sent.values()) == {1}  # nobody twice
    final = await ledger_counts(journal, "spring")
    assert final["accepted"] == USERS
    assert sum(final.values()) == USERS


async def test_killed_mid_run_a_rerun_completes_it_nobody_twice(
    sb: Sandbox, tmp_path: Path
) -> None:
    users = write_csv(tmp_path / "users.csv", users_rows(USERS))
    journal = tmp_path / "run.db"
    poll = str(await first_poll(sb))
    await sb.set_faults({"kind": "latency", "route": "send_campaign", "seconds": LATENCY})
    argv = ["send", poll, str(users), "--bulk", "--journal", str(journal), "--json"]
    argv += ["--chunk-size", "10", "--concurrency", "4"]
    killed = await interrupted(sb, argv, signal.SIGKILL)
    assert killed.code == -signal.SIGKILL
    await sb.clear_faults()

    again = await run_process(str(SCRIPT), *argv, env=sandbox_env(sb), timeout=60)
    # The requests the kill left unanswered may have reached the service: ambiguous.
    assert again.code == 4, again.err
    report = orjson.loads(again.out)["counts"]
    assert sum(report.values()) == USERS
    assert 0 < report["ambiguous"] <= 40
    # The ledger holds the dead sender's claims in flight (ambiguous once expired).
    final = await ledger_counts(journal, f"poll-{poll}")
    assert final["planned"] == 0
    assert final["in_flight"] + final["ambiguous"] == report["ambiguous"]
    assert final["accepted"] == report["accepted"] == USERS - report["ambiguous"]
    sent = await phone_counts(sb)
    assert set(sent.values()) == {1}  # nobody twice
    assert len(sent) >= final["accepted"]


async def test_a_second_ctrl_c_stops_at_once(sb: Sandbox, tmp_path: Path) -> None:
    users = write_csv(tmp_path / "users.csv", users_rows(100))
    journal = tmp_path / "run.db"
    poll = str(await first_poll(sb))
    # Answers slower than the grace: the first Ctrl-C alone would wait 10 s.
    await sb.set_faults({"kind": "latency", "route": "send_campaign", "seconds": 12})
    process = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        *["send", poll, str(users), "--bulk", "--journal", str(journal), "--chunk-size", "10"],
        stderr=asyncio.subprocess.PIPE,
        env=sandbox_env(sb),
    )
    try:
        for _ in range(600):
            if await sends_seen(sb) >= 4:
                break
            await asyncio.sleep(0.05)
        process.send_signal(signal.SIGINT)
        await asyncio.sleep(0.5)
        assert process.returncode is None  # in its grace
        started = asyncio.get_running_loop().time()
        process.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(process.communicate(), 30)
        took = asyncio.get_running_loop().time() - started
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 130, err.decode()
    assert took < 5
    # The four requests under way are unknown: settled ambiguous (or, when the
    # second Ctrl-C cut the settling short, left in flight: ambiguous on a rerun).
    counts = await ledger_counts(journal, f"poll-{poll}")
    assert counts["ambiguous"] + counts["in_flight"] == 40
    assert counts["accepted"] == 0


def test_the_resume_command_repeats_every_option_but_the_key() -> None:
    argv = ["send", "12", "my users.csv", "--bulk", "--journal", "j.db", "--chunk-size", "50"]
    argv += ["--send-window", "09:00-18:00", "--days", "mon-fri", "--daily-limit", "900"]
    argv += ["--default-tz", "America/Bogota"]
    argv += ["--line", "573001112222", "--line", "573003334444", "--retry-rejected"]
    argv += ["--api-key", "sk_live_secret_0123456789", "--campaign-url", "http://c.test"]
    argv += ["--interrupt-grace", "2.5", "--quiet", "--follow", "--follow-timeout", "90.5"]
    resumed = shlex.split(resume_command(parse(argv)))
    assert Path(resumed[0]).name == "campaignkit" or resumed[0] == "campaignkit"
    again = parse(resumed[1:])
    for name in ("poll_id", "file", "journal", "chunk_size", "send_window", "days", "default_tz"):
        assert getattr(again, name) == getattr(parse(argv), name), name
    assert (again.run, again.daily_limit) == ("poll-12", 900)
    assert again.lines == ["573001112222", "573003334444"]
    assert (again.retry_rejected, again.interrupt_grace, again.quiet) == (True, 2.5, True)
    assert (again.follow, again.follow_timeout) == (True, 90.5)
    assert again.campaign_url == "http://c.test"
    assert again.api_key is None
    assert "sk_live" not in " ".join(resumed)


BLOCKING = """
import sys
from campaignkit.sync import CampaignClient

users = [{"country_code": "+57", "cellphone": f"300{i:07d}"} for i in range(300)]
with CampaignClient() as client:
    try:
        client.send_bulk(sys.argv[1], users, chunk_size=10, journal=sys.argv[2], run="sync")
    except KeyboardInterrupt:
        print("interrupted")
        sys.exit(130)
"""


async def test_ctrl_c_in_the_blocking_client_waits_for_the_requests_under_way(
    sb: Sandbox, tmp_path: Path
) -> None:
    journal = tmp_path / "run.db"
    poll = str(await first_poll(sb))
    await sb.set_faults({"kind": "latency", "route": "send_campaign", "seconds": LATENCY})
    program = (sys.executable, "-c", BLOCKING)
    first = await interrupted(sb, [poll, str(journal)], signal.SIGINT, program)
    assert (first.code, first.out.strip()) == (130, "interrupted"), first.err
    counts = await ledger_counts(journal, "sync")
    # Settled from their answers within the grace, not left in flight.
    assert counts["in_flight"] == counts["ambiguous"] == 0
    assert await sends_seen(sb) * 10 == counts["accepted"] >= 80
