"""The ``campaignkit`` command, against an in-process sandbox.

Most commands run in process (``cli.run`` in a worker thread, so the sandbox
keeps serving on the test's loop); exit-code, one-line-error, ``sandbox`` and
``demo`` checks run the real console script as a subprocess, with timeouts.
"""

from __future__ import annotations

import asyncio
import csv
import io
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.processes import run_process

from campaignkit import User, cli
from campaignkit.sandbox import Sandbox

SCRIPT = Path(sys.executable).with_name("campaignkit")
ENV_NAMES = (
    "CAMPAIGNKIT_API_KEY",
    "CAMPAIGNKIT_BASE_URL",
    "CAMPAIGNKIT_CAMPAIGN_URL",
    "CAMPAIGNKIT_AGENT_URL",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def sb() -> AsyncIterator[Sandbox]:
    async with Sandbox(speed=100, seed=3) as sandbox:
        yield sandbox


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json(self) -> Any:
        return orjson.loads(self.out)


async def run(sb: Sandbox | None, *argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    conn = (
        []
        if sb is None
        else [
            "--api-key",
            sb.api_key,
            "--base-url",
            sb.base_url,
            "--campaign-url",
            sb.campaign_url,
            "--agent-url",
            sb.agent_url,
        ]
    )
    code = await asyncio.wait_for(
        asyncio.to_thread(cli.run, [*argv, *conn], stdout=out, stderr=err), 60
    )
    return Result(code, out.getvalue(), err.getvalue())


async def subprocess(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> Result:
    full_env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    full_env.update(env or {})
    return Result(*await run_process(str(SCRIPT), *argv, env=full_env, timeout=timeout))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def users_rows(count: int, start: int = 0) -> list[dict[str, str]]:
    return [
        {"country_code": "+57", "cellphone": f"300{i:07d}", "name": f"U{i}"}
        for i in range(start, start + count)
    ]


async def first_poll(sb: Sandbox) -> int:
    async with sb.client() as client:
        return (await client.list_polls())[0].id


# -- read commands ----------------------------------------------------------------


async def test_polls_table_and_json(sb: Sandbox) -> None:
    table = await run(sb, "polls")
    assert table.code == 0, table.err
    assert table.out.splitlines()[0].split() == ["id", "name"]
    data = (await run(sb, "polls", "--json")).json()
    assert data
    assert {"id", "name"} <= set(data[0])
    assert str(data[0]["id"]) in table.out


async def test_global_flags_before_the_command(sb: Sandbox) -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = ["--json", "--api-key", sb.api_key, "--base-url", sb.base_url, "polls"]
    code = await asyncio.to_thread(cli.run, argv, stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert isinstance(orjson.loads(out.getvalue()), list)


async def test_env_configuration(sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMPAIGNKIT_API_KEY", sb.api_key)
    monkeypatch.setenv("CAMPAIGNKIT_AGENT_URL", sb.agent_url)
    result = await run(None, "agents", "--json")
    assert result.code == 0, result.err
    assert all({"id", "email", "tags"} <= set(a) for a in result.json())


async def test_agents_and_tag_filter(sb: Sandbox) -> None:
    agents = (await run(sb, "agents", "--json")).json()
    tag = agents[0]["tags"][0]["name"]
    tagged = (await run(sb, "agents", "--json", "--tag", tag.upper())).json()
    assert tagged
    assert all(tag in {t["name"] for t in a["tags"]} for a in tagged)
    assert len(tagged) <= len(agents)
    table = await run(sb, "agents")
    assert agents[0]["email"] in table.out


async def test_status_of_unknown_launch_is_one_line_error(sb: Sandbox) -> None:
    result = await run(sb, "status", "nope0000")
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert result.err.startswith("campaignkit: error: ")
    assert "404" in result.err


# -- send, track, status ----------------------------------------------------------------


async def test_send_csv_then_status_and_track(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    rows = users_rows(3)
    rows.append({"country_code": "+57", "cellphone": "3110009916", "name": "failing"})
    path = write_csv(tmp_path / "users.csv", rows)
    sent = await run(sb, "send", str(poll), str(path), "--json")
    assert sent.code == 0, sent.err
    ack = sent.json()
    launch = ack["launch_request_id"]
    assert ack["id"] == str(poll)

    tracked = await run(sb, "track", launch, "--settled", "--poll-interval", "0.05", "--json")
    assert tracked.code == 0, tracked.err
    data = tracked.json()
    assert data["status"] == "DONE"
    assert data["counts"] == {"DELIVERED": 3, "FAILURE_BY_RATE_LIMIT": 1}
    assert "tracking" in tracked.err  # the progress line went to stderr

    status = await run(sb, "status", launch)
    assert status.code == 0, status.err
    assert "DELIVERED" in status.out
    assert "FAILURE_BY_RATE_LIMIT" in status.out
    assert "4 deployments" in status.out
    listed = await run(sb, "status", launch, "--deployments")
    assert "3110009916" in listed.out


async def test_send_json_with_track(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    path = tmp_path / "users.json"
    path.write_bytes(
        orjson.dumps(
            {
                "users": [
                    {
                        "cellphone": "3000000001",
                        "country_code": "+57",
                        "user_session_keys": {"a": "1"},
                    },
                    {
                        "cellphone": "3000009922",
                        "country_code": "+57",
                        "user_session_keys": [{"key": "b", "value": "2"}],
                    },
                ]
            }
        )
    )
    result = await run(sb, "send", str(poll), str(path), "--track", "-q")
    assert result.code == 0, result.err
    assert "launch_request_id:" in result.out
    assert "DONE" in result.out
    assert result.err == ""  # --quiet: no progress, no notes


async def test_send_invalid_user_is_usage_error_naming_the_path(
    sb: Sandbox, tmp_path: Path
) -> None:
    poll = await first_poll(sb)
    path = write_csv(
        tmp_path / "u.csv",
        [
            {"country_code": "+57", "cellphone": "3000000001"},
            {"country_code": "57", "cellphone": "3000000002"},
        ],
    )
    result = await run(sb, "send", str(poll), str(path))
    assert result.code == 2
    assert "users[1].country_code" in result.err
    assert result.err.count("\n") == 1
    assert (await sb.snapshot(users=False))["companies"][0]["launches"] in ([], {})


async def test_send_missing_file_and_bad_csv_header(sb: Sandbox, tmp_path: Path) -> None:
    missing = await run(sb, "send", "1", str(tmp_path / "nope.csv"))
    assert missing.code == 2
    assert "no such file" in missing.err
    bad = tmp_path / "bad.csv"
    bad.write_text("phone,name\n300,x\n")
    result = await run(sb, "send", "1", str(bad))
    assert result.code == 2
    assert "country_code" in result.err


async def test_send_unknown_poll_is_api_error(sb: Sandbox, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "u.csv", users_rows(1))
    result = await run(sb, "send", "987654", str(path))
    assert result.code == 1
    assert "404" in result.err


async def test_bulk_send_with_journal_resumes(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    rows = users_rows(50)
    rows.append(dict(rows[0]))  # a duplicate phone
    path = write_csv(tmp_path / "users.csv", rows)
    journal = tmp_path / "journal.sqlite"
    argv = ("send", str(poll), str(path), "--bulk", "--chunk-size", "20", "--journal", str(journal))
    first = await run(sb, *argv, "--json")
    assert first.code == 0, first.err
    report = first.json()
    assert report["counts"]["accepted"] == 50
    assert report["counts"]["duplicate"] == 1
    assert len(report["launch_request_ids"]) == 3
    assert "sending" in first.err

    second = await run(sb, *argv, "--json")
    assert second.code == 0, second.err
    assert second.json()["launch_request_ids"] == report["launch_request_ids"]
    launches = (await sb.snapshot(users=False))["companies"][0]["launches"]
    assert len(launches) == 3  # nothing was sent twice


async def test_bulk_send_invalid_rows_exit_6(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    rows = [*users_rows(3), {"country_code": "57", "cellphone": "3000000009", "name": "x"}]
    path = write_csv(tmp_path / "users.csv", rows)
    result = await run(sb, "send", str(poll), str(path), "--bulk")
    assert result.code == 6
    assert "accepted" in result.out
    assert "invalid: line 5" in result.err


async def test_journal_needs_bulk(sb: Sandbox, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "u.csv", users_rows(1))
    result = await run(sb, "send", "1", str(path), "--journal", str(tmp_path / "j"))
    assert result.code == 2
    assert "--bulk" in result.err


# -- sessions, history, update-session ------------------------------------------------


async def test_sessions_export_25000_across_pages(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    before = await run(sb, "sessions", str(poll))
    baseline = len(before.out.splitlines())
    await sb.add_sessions(poll, 25_000)
    out = tmp_path / "sessions.jsonl"
    result = await run(sb, "sessions", str(poll), "-o", str(out), "--page-size", "1000")
    assert result.code == 0, result.err
    lines = out.read_text().splitlines()
    assert len(lines) == 25_000 + baseline
    records = [orjson.loads(line) for line in lines]
    assert len({r["id"] for r in records}) == len(records)
    assert {"id", "created_at", "finished_at", "user"} <= set(records[0])
    assert f"wrote {len(lines)} sessions" in result.err
    assert not (tmp_path / "sessions.jsonl.part").exists()


async def test_sessions_csv_since_until(sb: Sandbox) -> None:
    poll = await first_poll(sb)
    now = int(await sb.now())
    await sb.add_sessions(poll, 100, start=now - 100_000, end=now - 90_000)
    result = await run(
        sb,
        "sessions",
        str(poll),
        "--format",
        "csv",
        "--since",
        str(now - 100_000),
        "--until",
        str(now - 89_000),
    )
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert len(rows) == 100
    assert list(rows[0]) == ["id", "created_at", "finished_at", "country_code", "cellphone"]
    assert result.err == "sessions 100 exported\n"  # the progress line, nothing else


async def test_sessions_bad_range_is_usage_error(sb: Sandbox) -> None:
    result = await run(sb, "sessions", "1", "--since", "2025-02-01", "--until", "2025-01-01")
    assert result.code == 2
    assert "--until" in result.err
    result = await run(sb, "sessions", "1", "--since", "yesterday")
    assert result.code == 2


async def test_update_session_and_history(sb: Sandbox) -> None:
    poll = await first_poll(sb)
    async with sb.client() as client:
        user = User(cellphone="3000000042", country_code="+57", user_session_keys={"n": "1"})
        ack = await client.send_campaign(poll, [user])
        async for _ in client.track(ack, until="settled", poll_interval=0.05, timeout=30):
            pass
    reply = await sb.reply("3000000042", text="hello there")
    session = reply["session_external_id"]

    updated = await run(sb, "update-session", session, "plan=gold", "--keys-json", '{"score": 5}')
    assert updated.code == 0, updated.err
    assert session in updated.out

    history = await run(sb, "history", session, "--json")
    assert history.code == 0, history.err
    texts = [entry["message"]["text"] for entry in history.json()]
    assert "hello there" in texts
    assert len(texts) >= 3
    table = await run(sb, "history", session)
    assert "USER" in table.out
    assert "hello there" in table.out


async def test_update_session_needs_keys(sb: Sandbox) -> None:
    result = await run(sb, "update-session", "sr-1")
    assert result.code == 2
    assert "KEY=VALUE" in result.err
    result = await run(sb, "update-session", "sr-1", "novalue")
    assert result.code == 2


# -- errors as a user sees them (real console script) ----------------------------------


async def test_bad_flags_exit_2() -> None:
    for argv in (
        ["polls", "--bogus"],
        ["nosuchcommand"],
        [],
        ["sessions"],
        ["track", "x", "--poll-interval", "-1"],
    ):
        result = await subprocess(*argv)
        assert result.code == 2, argv
        assert "Traceback" not in result.err
        assert "error:" in result.err


async def test_missing_key_is_one_line_exit_3() -> None:
    result = await subprocess("polls", env={"CAMPAIGNKIT_BASE_URL": "http://127.0.0.1:9"})
    assert result.code == 3
    assert result.out == ""
    assert result.err.count("\n") == 1
    assert "no API key" in result.err
    assert "CAMPAIGNKIT_API_KEY" in result.err


async def test_missing_host_is_config_error() -> None:
    result = await subprocess("agents", env={"CAMPAIGNKIT_API_KEY": "k-123456"})
    assert result.code == 3
    assert "--agent-url" in result.err
    assert result.err.count("\n") == 1


async def test_unreachable_host_is_one_line_exit_5() -> None:
    key = "sk_live_TOPSECRET_42"
    env = {"CAMPAIGNKIT_API_KEY": key, "CAMPAIGNKIT_BASE_URL": f"http://127.0.0.1:{closed_port()}"}
    result = await subprocess("polls", "--max-retries", "0", "--timeout", "5", env=env)
    assert result.code == 5
    assert result.err.count("\n") == 1
    assert result.err.startswith("campaignkit: error: ")
    assert "Traceback" not in result.err
    assert key not in result.err

    debug = await subprocess("polls", "--max-retries", "0", "--debug", "--api-key", key, env=env)
    assert debug.code == 5
    assert "Traceback" in debug.err
    assert key not in debug.err + debug.out


async def test_help_documents_exit_codes() -> None:
    result = await subprocess("--help")
    assert result.code == 0
    for line in ("Exit codes:", "ambiguous send", "130"):
        assert line in result.out
    for command in (
        "demo",
        "sandbox",
        "send",
        "track",
        "status",
        "sessions",
        "history",
        "polls",
        "agents",
        "update-session",
    ):
        assert command in result.out
    sub = await subprocess("send", "--help")
    assert "--bulk" in sub.out
    assert "--journal" in sub.out


async def test_sandbox_command_serves_until_stopped() -> None:
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        "sandbox",
        "--port",
        "0",
        "--speed",
        "50",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        env: dict[str, str] = {}
        while len(env) < 4:
            line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
            assert line, "the sandbox exited early"
            if line.strip().startswith("export "):
                name, _, value = line.strip().removeprefix("export ").partition("=")
                env[name] = value
        assert set(env) == set(ENV_NAMES)
        result = await subprocess("polls", "--json", env=env)
        assert result.code == 0, result.err
        assert result.json()
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop, exit 0
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_demo_end_to_end() -> None:
    result = await subprocess("demo", "--speed", "40", timeout=90)
    assert result.code == 0, result.err[-2000:]
    out = result.out
    for marker in (
        "202 accepted",
        "final per-status table",
        "DELIVERED",
        "FAILURE_BY_PAYMENT_ISSUE",
        "PUSH_NOTIFICATION",
        "total 200",
        "the sandbox POSTed the webhook: HTTP 202",
        "on_reply got session_external_id",
        "Session updated",
        "Session history",
        "Yes, tell me more",
        "Done in",
    ):
        assert marker in out, marker
    assert "200/200" in result.err  # the progress reached the end
    assert "Traceback" not in result.err


# -- failure modes of long work ------------------------------------------------------------


async def test_track_timeout_on_stuck_deployment_exit_5(sb: Sandbox) -> None:
    poll = await first_poll(sb)
    async with sb.client() as client:
        stuck = User(cellphone="3000009901", country_code="+57")  # 9901: stuck in progress
        ack = await client.send_campaign(poll, [stuck])
    result = await run(
        sb,
        "track",
        ack.launch_request_id,
        "--settled",
        "--poll-interval",
        "0.05",
        "--track-timeout",
        "1",
    )
    assert result.code == 5
    assert "RECEIVED_BY_WORKER" in result.out  # the last counts are still shown
    assert result.err.strip().splitlines()[-1].startswith("campaignkit: error: ")


async def test_send_5xx_is_ambiguous_exit_4(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    path = write_csv(tmp_path / "u.csv", users_rows(2))
    await sb.set_faults({"kind": "500", "route": "send_campaign", "count": 1})
    result = await run(sb, "send", str(poll), str(path))
    assert result.code == 4
    assert "do not resend blindly" in result.err
    assert result.err.count("\n") == 1


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_plain_and_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = io.StringIO()
    with cli.Progress(plain, "work", interval=0) as progress:
        progress.update(5, 10, "half")
        progress.update(10, 10, "all")
    lines = plain.getvalue().splitlines()
    assert lines == [
        "work [##########..........] 5/10 half",
        "work [####################] 10/10 all",
    ]

    tty = FakeTTY()
    with cli.Progress(tty, "work") as progress:
        progress.update(7, 10, "nearly")
    assert "7/10" in tty.getvalue()
    assert "nearly" in tty.getvalue()

    monkeypatch.setattr(cli, "_rich_available", lambda: False)
    tty = FakeTTY()
    with cli.Progress(tty, "work") as progress:
        progress.update(3, 4)
    assert (
        tty.getvalue()
        == "\r\x1b[2Kwork [###############.....] 3/4\r\x1b[2Kwork [###############.....] 3/4\n"
    )

    quiet = io.StringIO()
    with cli.Progress(quiet, "work", enabled=False) as progress:
        progress.update(1, 2)
    assert quiet.getvalue() == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1700000000", 1700000000),
        ("2024-01-01", 1704067200),
        ("2024-01-01T01:00:00Z", 1704070800),
        ("2024-01-01T02:00:00+01:00", 1704070800),
    ],
)
def test_timestamps(text: str, expected: int) -> None:
    assert cli._timestamp(text) == expected
