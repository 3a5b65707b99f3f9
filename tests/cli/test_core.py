"""Errors as a user sees them: the real console script, exit statuses,
one-line errors, the help."""

from __future__ import annotations

import asyncio
import os
import secrets
import sys

from helpers.cli import SCRIPT, closed_port, sandbox_env, subprocess

from campaignkit import cli
from campaignkit.cli import ExitStatus
from campaignkit.sandbox import Sandbox


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


async def test_usage_errors_never_quote_the_key() -> None:
    # argparse quoted the key typed where the command belongs, unredacted.
    key = "sk_live_" + secrets.token_urlsafe(24)
    results = [
        await subprocess(key, "polls", env={"CAMPAIGNKIT_API_KEY": key}),
        await subprocess(f"--api-key={key}", key),
        await subprocess("--api-key", key, "polls", "--max-retries", key),
        await subprocess("ak_" + key),  # shaped like the service's keys
    ]
    assert [result.code for result in results] == [2, 2, 2, 2]
    assert all("error:" in r.err and "***" in r.err for r in results)
    assert not any(key[8:20] in r.err + r.out for r in results)


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


async def test_a_broken_proxy_is_named_not_the_service_url() -> None:
    password = "proxy-pw-SECRET-77"
    proxy = f"http://bob:{password}@127.0.0.1:{closed_port()}"
    env = {
        "CAMPAIGNKIT_API_KEY": "sk_live_TOPSECRET_42",
        "CAMPAIGNKIT_BASE_URL": "https://campaigns.invalid",
        **{name: "" for name in ("NO_PROXY", "no_proxy")},
        **{name: proxy for name in ("HTTPS_PROXY", "https_proxy")},
    }
    result = await subprocess("polls", "--max-retries", "0", "--timeout", "5", env=env)
    assert result.code == 5
    assert result.err.startswith("campaignkit: error: cannot connect to the proxy 'http://bob:***@")
    assert "(HTTPS_PROXY)" in result.err
    assert "is the proxy right and reachable?" in result.err
    assert "service URL" not in result.err
    assert password not in result.err


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


async def test_help_needs_no_docstrings() -> None:
    """``python -OO`` strips docstrings: the help, exit codes included, stays."""
    program = (sys.executable, "-OO", "-m", "campaignkit.cli")
    result = await subprocess("--help", program=program)
    assert result.code == 0, result.err
    assert "130  interrupted (Ctrl-C)" in result.out
    sub = await subprocess("demo", "--help", program=program)
    assert sub.code == 0, sub.err
    assert "--speed" in sub.out
    assert "Exit codes:" in sub.out


def test_exit_statuses_keep_their_numbers() -> None:
    expected = {
        "ok": 0,
        "error": 1,
        "usage": 2,
        "config": 3,
        "ambiguous": 4,
        "network": 5,
        "partial": 6,
        "no_ledger": 7,
        "interrupted": 130,
    }
    assert {status.name.lower(): status.value for status in ExitStatus} == expected
    assert expected == cli.EXIT


async def test_a_reader_that_leaves_early_ends_the_command_quietly(sb: Sandbox) -> None:
    # `campaignkit polls | head -1`: the pipe closes before the output is
    # written. No error blaming the service URL, no traceback.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        process = await asyncio.create_subprocess_exec(
            str(SCRIPT),
            "polls",
            stdout=write_end,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **sandbox_env(sb)},
        )
    finally:
        os.close(write_end)
    async with asyncio.timeout(30):
        _, err = await process.communicate()
    assert err.decode() == ""
    assert process.returncode == ExitStatus.OK
