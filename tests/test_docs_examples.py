"""Every python block of the README and of the documentation site (``docs/``)
runs as written against a sandbox, or, marked ``<!-- fragment -->`` on the
last line before its fence (a piece of a program: ``client``, ``ack`` or
``users`` come from around it), compiles. Some blocks' output is checked too."""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import pytest
from helpers.processes import Finished, run_process
from mypy import api

from campaignkit.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FRAGMENT = "<!-- fragment -->"
FENCE = re.compile(r"^(\s*)```(\w*)")


@attrs.frozen
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    heading: str  # the nearest heading above, with its hashes
    code: str
    fragment: bool

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def page_blocks(path: Path) -> list[Block]:
    """The python blocks of the Markdown page ``path``, in order."""
    page = str(path.relative_to(ROOT))
    found: list[Block] = []
    heading, previous = "", ""
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = FENCE.match(line)
        if fence is None:
            if line.startswith("#"):
                heading = line
            if line.strip():
                previous = line.strip()
            index += 1
            continue
        indent, language = fence.groups()
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        if language == "python":
            body = [text.removeprefix(indent) for text in lines[index + 1 : end]]
            code = "\n".join(body) + "\n"
            found.append(Block(page, index + 1, heading, code, previous == FRAGMENT))
        previous = "```"
        index = end + 1
    return found


BLOCKS = [block for page in PAGES for block in page_blocks(page)]
FRAGMENTS = [block for block in BLOCKS if block.fragment]
PROGRAMS = [block for block in BLOCKS if not block.fragment]


def the_block(page: str, heading: str) -> Block:
    [block] = [b for b in BLOCKS if b.page == page and b.heading == heading]
    return block


def sandbox_env(sb: Sandbox) -> dict[str, str]:
    return {
        "CAMPAIGNKIT_API_KEY": sb.api_key,
        "CAMPAIGNKIT_BASE_URL": sb.base_url,
        "CAMPAIGNKIT_CAMPAIGN_URL": sb.campaign_url,
        "CAMPAIGNKIT_AGENT_URL": sb.agent_url,
    }


# What some programs print (or leave in the sandbox), beyond exiting 0.
Check = Callable[[Finished, Sandbox], Awaitable[None]]


async def quickstart(ran: Finished, sb: Sandbox) -> None:
    lines = ran.out.splitlines()
    assert "3001234567 None -> " in ran.out  # the tracker saw the first user
    assert any(line.startswith("DONE [") for line in lines)
    assert sum(line.endswith(" messages") for line in lines) == 5  # the sandbox's sessions
    assert lines[-1].startswith("['agent")


async def mocked_io(ran: Finished, sb: Sandbox) -> None:
    # It runs on MockExchange alone: the sandbox sees no request.
    assert ran.out.splitlines()[0] == "Welcome 2 requests, 1 wait"
    assert ran.out.splitlines()[1].startswith('L1 b\'{"users":[{"cellphone":"3001234567"')
    assert (await sb.snapshot())["companies"][0]["launches"] == []


async def blocking_client(ran: Finished, sb: Sandbox) -> None:
    assert "3001234567 None -> " in ran.out
    assert ran.out.splitlines()[-1] == "DONE"


async def raw_answer(ran: Finished, sb: Sandbox) -> None:
    first, second = ran.out.splitlines()
    assert first.startswith("list_polls 200 application/json")
    assert second == "True"


async def polls_counted(ran: Finished, sb: Sandbox) -> None:
    assert ran.out.split()[0].isdigit()
    assert int(ran.out.split()[0]) > 0


async def body_logging(ran: Finished, sb: Sandbox) -> None:
    [send] = [line for line in ran.err.splitlines() if "POST /v2/send-campaign" in line]
    assert 'request={"users":[{"cellphone":"********67"' in send
    assert "3001234567" not in ran.err
    assert sb.api_key not in ran.err


async def suppression_list(ran: Finished, sb: Sandbox) -> None:
    assert ran.out.splitlines() == [
        "2 2",
        "[('+573001234561', 'asked us to stop'), ('+573001234562', 'FAILURE_BY_OPTOUT_CONTACT')]",
        "['+573001234561', '+573001234562']",
        "3 1",  # the two sent before, reported again, and the one taken off the list
    ]


async def sending_line(ran: Finished, sb: Sandbox) -> None:
    assert ran.out.split() == ["3", "2"]
    launches = (await sb.snapshot())["companies"][0]["launches"]
    lines = sorted(user["line"] for launch in launches for user in launch["users"])
    assert lines == ["15550000101", "15550000101", "15550000102"]


CHECKS: dict[tuple[str, str], Check] = {
    ("README.md", "## Quickstart"): quickstart,
    ("docs/getting-started.md", "## Quickstart"): quickstart,
    ("docs/testing.md", "# Testing your code"): mocked_io,
    (
        "docs/client-options.md",
        "## A blocking client for scripts, cron jobs and notebooks",
    ): blocking_client,
    ("docs/client-options.md", "## The raw answer of any call"): raw_answer,
    ("docs/client-options.md", "## Headers: on every request, on one call"): polls_counted,
    ("docs/client-options.md", "## Proxies"): polls_counted,
    ("docs/client-options.md", "## Logging bodies while debugging"): body_logging,
    ("docs/bulk.md", "## The suppression list"): suppression_list,
    ("docs/sending-line.md", "# Protecting the sending line"): sending_line,
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("block", PROGRAMS, ids=lambda block: block.id)
async def test_the_program_runs_against_the_sandbox(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # what a program writes (a ledger file) lands there
    script = tmp_path / "block.py"
    script.write_text(block.code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGNKIT_")}
    async with Sandbox(speed=50) as sb:
        ran = await run_process(sys.executable, str(script), env=env | sandbox_env(sb), timeout=90)
        assert ran.code == 0, f"{block.id} ({block.heading}) failed:\n{ran.err}"
        check = CHECKS.get((block.page, block.heading))
        if check is not None:
            await check(ran, sb)


@pytest.mark.parametrize("block", FRAGMENTS, ids=lambda block: block.id)
def test_the_fragment_compiles(block: Block) -> None:
    # A fragment may await at its top level, as it would inside a coroutine.
    compile(block.code, block.id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_every_check_names_a_program() -> None:
    programs = {(block.page, block.heading) for block in PROGRAMS}
    assert set(CHECKS) <= programs, set(CHECKS) - programs
    # One program per checked heading: a second one would be checked by the wrong rule.
    assert len([b for b in PROGRAMS if (b.page, b.heading) in CHECKS]) == len(CHECKS)


def test_the_pages_hold_programs_and_fragments() -> None:
    # The parser finds what the pages hold: a page added or a marker misspelt
    # shows here, not as a silently skipped block.
    assert len(PROGRAMS) >= len(CHECKS)
    assert {b.page for b in FRAGMENTS} >= {"docs/tracking.md", "docs/workers.md"}
    marked = sum(
        line.strip() == FRAGMENT
        for page in PAGES
        for line in page.read_text(encoding="utf-8").splitlines()
    )
    assert marked == len(FRAGMENTS)


def test_the_readme_and_getting_started_show_one_quickstart() -> None:
    readme = the_block("README.md", "## Quickstart")
    site = the_block("docs/getting-started.md", "## Quickstart")
    assert readme.code == site.code


def test_the_readme_is_the_first_hour() -> None:
    # The rest lives on the site: the README stays short enough to read at once.
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 400


@pytest.mark.timeout(180)
def test_the_error_handling_fragment_passes_mypy_strict() -> None:
    # `except TimeoutError` (the builtin) then `.last_status` fails mypy: the
    # docs catch campaignkit's own, by that name.
    [block] = [b for b in BLOCKS if "except campaignkit.TimeoutError" in b.code]
    assert "except campaignkit.ConnectionError" in block.code
    out, err, status = api.run(["--strict", "--no-error-summary", "-c", block.code])
    assert status == 0, out + err
    wrong = block.code.replace("campaignkit.TimeoutError", "TimeoutError")
    out, _err, status = api.run(["--strict", "--no-error-summary", "-c", wrong])
    assert status == 1
    assert '"TimeoutError" has no attribute "last_status"' in out
