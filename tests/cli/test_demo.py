"""``campaignkit demo``: the real console script, end to end."""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from helpers.cli import (
    subprocess,
)
from helpers.processes import run_process

from campaignkit.cli.demo import next_steps

# A shell where `make demo` left the virtualenv inactive: its bin is not on PATH.
BARE_PATH = {"PATH": os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])}


async def test_demo_end_to_end() -> None:
    result = await subprocess("demo", "--speed", "40", timeout=90, env=BARE_PATH)
    assert result.code == 0, result.err[-2000:]
    out = result.out
    for marker in (
        # The answer's HTTP status, not read as a count of people (of 200).
        "   queued by the service (HTTP 202 Accepted): launch_request_id ",
        "final per-status table",
        "DELIVERED",
        "FAILURE_BY_PAYMENT_ISSUE",
        "PUSH_NOTIFICATION",
        "200/200 settled (100%)",
        "the sandbox POSTed the response webhook: HTTP 200",
        "on_event got session_id sr-",
        "merged them into the session: {'plan': 'gold', 'assigned_agent': '",
        "Session history",
        "Yes, tell me more",
        "Done in",
    ):
        assert marker in out, marker
    assert "200/200" in result.err  # the progress reached the end
    assert "Traceback" not in result.err

    # The "Next:" commands work in the shell the demo ran from.
    next_line = next(line for line in out.splitlines() if "Next: `" in line)
    command = re.findall(r"`([^`]+)`", next_line)[1]
    assert command.endswith(" --help")
    assert command.split()[0] != "campaignkit"  # not on this PATH
    helped = await run_process(*shlex.split(command), env={**os.environ, **BARE_PATH}, timeout=30)
    assert helped.code == 0, helped.err
    assert "usage: campaignkit" in helped.out


def test_next_steps_quote_a_virtualenv_under_a_path_with_spaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hint to activate the virtualenv is a command a shell runs as it is,
    even where the virtualenv's path holds a space."""
    bin_dir = tmp_path / "my project" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("activate", "campaignkit", "python"):
        (bin_dir / name).write_text("")
    monkeypatch.setattr(sys, "argv", [str(bin_dir / "campaignkit"), "demo"])
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", os.pathsep.join(["/usr/bin", "/bin"]))
    hint = next_steps().splitlines()[1]
    command = re.findall(r"`([^`]+)`", hint)[1]
    assert shlex.split(command) == [".", str(bin_dir / "activate")]
