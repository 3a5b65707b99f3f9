"""The README's quickstart runs as written against the sandbox."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from helpers.processes import run_process
from mypy import api

from campaignkit.sandbox import Sandbox

README = Path(__file__).resolve().parent.parent / "README.md"


def quickstart() -> str:
    block = re.search(r"## Quickstart\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert block is not None, "the README has no Quickstart python block"
    return block.group(1)


async def test_the_quickstart_runs_against_the_sandbox(tmp_path: Path) -> None:
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart())
    async with Sandbox(speed=50) as sb:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGNKIT_")}
        env |= {
            "CAMPAIGNKIT_API_KEY": sb.api_key,
            "CAMPAIGNKIT_BASE_URL": sb.base_url,
            "CAMPAIGNKIT_CAMPAIGN_URL": sb.campaign_url,
            "CAMPAIGNKIT_AGENT_URL": sb.agent_url,
        }
        code, out, err = await run_process(sys.executable, str(script), env=env, timeout=60)
    assert code == 0, err
    lines = out.splitlines()
    assert "3001234567 None -> " in out  # the tracker saw the first user
    assert any(line.startswith("DONE [") for line in lines)
    assert sum(line.endswith(" messages") for line in lines) == 5  # the sandbox's sessions
    assert lines[-1].startswith("['agent")


def section_block(heading: str) -> str:
    """The first python block of the README section ``heading`` (with its
    hashes: ``## Title``, ``### Title``)."""
    text = README.read_text()
    section = re.split(r"\n#{2,} ", text.split(f"\n{heading}\n", 1)[1], maxsplit=1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, f"the README section {heading!r} has no python block"
    return block.group(1)


async def run_block(tmp_path: Path, heading: str, env: dict[str, str] | None = None) -> str:
    """Run the section's block as a script (settings only from ``env``); its stdout."""
    script = tmp_path / "block.py"
    script.write_text(section_block(heading))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGNKIT_")}
    code, out, err = await run_process(
        sys.executable, str(script), env=clean | (env or {}), timeout=60
    )
    assert code == 0, err
    return out


async def test_the_testing_example_runs_without_a_network(tmp_path: Path) -> None:
    out = await run_block(tmp_path, "## Testing your code")
    assert out.splitlines()[0] == "Welcome 2 requests, 1 wait"
    assert out.splitlines()[1].startswith('L1 b\'{"users":[{"cellphone":"3001234567"')


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.mark.timeout(180)
def test_the_error_handling_snippet_passes_mypy_strict() -> None:
    # `except TimeoutError` (the builtin) then `.last_status` fails mypy: the
    # README catches campaignkit's own, by that name.
    [block] = [b for b in python_blocks() if "except campaignkit.TimeoutError" in b]
    assert "except campaignkit.ConnectionError" in block
    out, err, status = api.run(["--strict", "--no-error-summary", "-c", block])
    assert status == 0, out + err
    wrong = block.replace("campaignkit.TimeoutError", "TimeoutError")
    out, _err, status = api.run(["--strict", "--no-error-summary", "-c", wrong])
    assert status == 1
    assert '"TimeoutError" has no attribute "last_status"' in out


def sandbox_env(sb: Sandbox) -> dict[str, str]:
    return {
        "CAMPAIGNKIT_API_KEY": sb.api_key,
        "CAMPAIGNKIT_BASE_URL": sb.base_url,
        "CAMPAIGNKIT_CAMPAIGN_URL": sb.campaign_url,
        "CAMPAIGNKIT_AGENT_URL": sb.agent_url,
    }


async def test_the_blocking_client_example_runs(tmp_path: Path) -> None:
    async with Sandbox(speed=50) as sb:
        out = await run_block(
            tmp_path, "### A blocking client for scripts, cron jobs and notebooks", sandbox_env(sb)
        )
    assert "3001234567 None -> " in out
    assert out.splitlines()[-1] == "DONE"


async def test_the_raw_answer_example_runs(tmp_path: Path) -> None:
    async with Sandbox(speed=50) as sb:
        out = await run_block(tmp_path, "### The raw answer of any call", sandbox_env(sb))
    first, second = out.splitlines()
    assert first.startswith("list_polls 200 application/json")
    assert second == "True"


@pytest.mark.parametrize("heading", ["### Headers: on every request, on one call", "### Proxies"])
async def test_the_header_and_proxy_examples_run(tmp_path: Path, heading: str) -> None:
    async with Sandbox(speed=50) as sb:
        out = await run_block(tmp_path, heading, sandbox_env(sb))
    assert out.split()[0].isdigit()
    assert int(out.split()[0]) > 0


async def test_the_body_logging_example_masks_phones_and_the_key(tmp_path: Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(section_block("### Logging bodies while debugging"))
    async with Sandbox(speed=50) as sb:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGNKIT_")}
        code, _, err = await run_process(
            sys.executable, str(script), env=env | sandbox_env(sb), timeout=60
        )
        key = sb.api_key
    assert code == 0, err
    [send] = [line for line in err.splitlines() if "POST /v2/send-campaign" in line]
    assert 'request={"users":[{"cellphone":"********67"' in send
    assert "3001234567" not in err
    assert key not in err


async def test_the_suppression_list_example_runs(tmp_path: Path) -> None:
    async with Sandbox(speed=50) as sb:
        out = await run_block(tmp_path, "### The suppression list", sandbox_env(sb))
    assert out.splitlines() == [
        "2 2",
        "[('+573001234561', 'asked us to stop'), ('+573001234562', 'FAILURE_BY_OPTOUT_CONTACT')]",
        "['+573001234561', '+573001234562']",
        "3 1",  # the two sent before, reported again, and the one taken off the list
    ]


async def test_the_sending_line_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # its journal, sending.db, is written there
    async with Sandbox(speed=50) as sb:
        out = await run_block(tmp_path, "### Protecting the sending line", sandbox_env(sb))
        launches = (await sb.snapshot())["companies"][0]["launches"]
    assert out.split() == ["3", "2"]
    lines = sorted(user["line"] for launch in launches for user in launch["users"])
    assert lines == ["15550000101", "15550000101", "15550000102"]
