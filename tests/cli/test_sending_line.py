"""``send --bulk`` with the options that protect the sending line."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from helpers.cli import first_poll, run, users_rows, write_csv

from campaignkit.sandbox import Sandbox


async def test_window_daily_limit_and_lines_from_the_command_line(
    sb: Sandbox, tmp_path: Path
) -> None:
    poll = await first_poll(sb)
    lines = (await sb.snapshot(users=False))["companies"][0]["lines"]
    rows = [{**row, "tz": "Asia/Tokyo"} for row in users_rows(6)]
    path = write_csv(tmp_path / "users.csv", rows)
    journal = tmp_path / "journal.sqlite"
    argv = ["send", str(poll), str(path), "--bulk", "--chunk-size", "2", "--journal", str(journal)]
    tokyo_hour = datetime.now(UTC).astimezone(ZoneInfo("Asia/Tokyo")).hour
    closed = "13:00-23:00" if tokyo_hour < 12 else "01:00-11:00"  # closed now in Tokyo
    argv += ["--send-window", closed, "--days", "mon-sun", "--daily-limit", "4"]
    argv += [arg for line in lines for arg in ("--line", line)]
    result = await run(sb, *argv, "--json")
    assert result.code == 6, result.err  # partial: some deferred
    report = result.json()
    assert (report["counts"]["accepted"], report["counts"]["deferred"]) == (4, 2)
    assert len(report["deferred"]) == 1
    assert report["deferred_reasons"] == {"daily limit": 2}
    got = [
        u for launch in (await sb.snapshot())["companies"][0]["launches"] for u in launch["users"]
    ]
    assert all(user["deployment_eta"] is not None for user in got)
    assert Counter(user["line"] for user in got) == Counter({lines[0]: 2, lines[1]: 2})
    text = await run(sb, *argv)
    assert "deferred (daily limit), not sent: 2 users: over the daily limit" in text.err
    runs = await run(None, "runs", "--journal", str(journal))
    run_name = runs.out.splitlines()[2].split()[0]
    export = tmp_path / "deferred.csv"
    exported = await run(
        None, "runs", run_name, "--journal", str(journal), "--export", "deferred", "-o", str(export)
    )
    assert "wrote 2 deferred users" in exported.err, exported.err
    assert len(export.read_text().splitlines()) == 3  # a header and the two deferred


async def test_bad_sending_line_options_are_usage_errors(sb: Sandbox, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "u.csv", users_rows(1))
    for extra, words in (
        (["--send-window", "9-5"], "--send-window"),
        (["--send-window", "09:00-17:00", "--days", "funday"], "--days"),
        (["--days", "mon-fri"], "--days needs --send-window"),
        (["--default-tz", "America/Bogota"], "--default-tz needs --send-window"),
        (["--send-window", "09:00-17:00", "--default-tz", "Mars/Olympus"], "--default-tz"),
        (["--line", "+57 300"], "lines[0]"),
        (["--daily-limit", "0"], ""),  # argparse's own message, on the real stderr
    ):
        result = await run(sb, "send", "1", str(path), "--bulk", *extra)
        assert result.code == 2, (extra, result.err)
        assert words in result.err, (extra, result.err)
    result = await run(sb, "send", "1", str(path), "--daily-limit", "5")
    assert result.code == 2
    assert "--daily-limit needs --bulk" in result.err


async def test_numbers_without_a_zone_are_counted_apart_and_default_tz_times_them(
    sb: Sandbox, tmp_path: Path
) -> None:
    poll = await first_poll(sb)
    rows = [{**row, "tz": ""} for row in users_rows(2)]  # empty cells: the numbers' zones
    rows.append({"country_code": "+57", "cellphone": "3301234567", "name": "N", "tz": ""})
    path = write_csv(tmp_path / "users.csv", rows)
    journal = tmp_path / "journal.sqlite"
    argv = ["send", str(poll), str(path), "--bulk", "--journal", str(journal)]
    argv += ["--send-window", "09:00-20:00"]
    first = await run(sb, *argv)
    assert first.code == 6, first.err  # partial: one deferred
    assert "deferred (zone unknown), not sent: 1 user:"  # it said "1 users" in first.err
    assert "give them a 'tz' column (or --default-tz)" in first.err
    shown = await run(None, "runs", f"poll-{poll}", "--journal", str(journal))
    assert "deferred (zone unknown): 1" in shown.out, shown.out
    listed = await run(None, "runs", f"poll-{poll}", "--journal", str(journal), "--json")
    assert listed.json()["deferred_reasons"] == {"zone unknown": 1}
    again = await run(sb, *argv, "--default-tz", "America/Bogota", "--json")
    assert again.code == 0, again.err
    report = again.json()
    assert (report["counts"]["accepted"], report["counts"]["deferred"]) == (3, 0)
    got = [
        u for launch in (await sb.snapshot())["companies"][0]["launches"] for u in launch["users"]
    ]
    assert sorted(user["cellphone"] for user in got) == ["3000000000", "3000000001", "3301234567"]
