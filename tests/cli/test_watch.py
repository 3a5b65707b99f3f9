"""``campaignkit dashboard``, ``report`` and ``demo --dashboard``."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from helpers.cli import SCRIPT, run, sandbox_args, subprocess

from campaignkit import User
from campaignkit.cli.context import ExitStatus
from campaignkit.dashboard import Access
from campaignkit.ledger import ACCEPTED, SqliteLedger
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)


async def send_one(sb: Sandbox) -> str:
    async with sb.client() as client:
        poll = (await client.list_polls())[0].id
        ack = await client.send_campaign(poll, [User(cellphone="3001112233", country_code="+57")])
    return ack.launch_request_id


async def test_report_writes_a_self_contained_file(sb: Sandbox, tmp_path: Path) -> None:
    launch = await send_one(sb)
    out = tmp_path / "report.html"
    result = await run(sb, "report", launch, "-o", str(out))
    assert result.code == 0, result.err
    assert f"report written to {out}" in result.err
    page = out.read_text()
    assert launch in page
    assert "<script" not in page
    assert "http://" not in page
    assert "https://" not in page


async def test_report_follows_the_launch_and_starts_the_chart_with_its_run(
    sb: Sandbox, tmp_path: Path
) -> None:
    await sb.set_clock(speed=3)  # a campaign of a few seconds
    journal = tmp_path / "runs.db"
    users = [User(cellphone=f"300111{i:04d}", country_code="+57") for i in range(5)]
    async with sb.client() as client:
        poll = (await client.list_polls())[0]
        report = await client.send_bulk(poll.id, users, journal=journal, run="r1")
    launch = report.launch_request_ids[0]
    async with SqliteLedger(journal) as ledger:
        phone = (await ledger.launch_phones("r1", [launch]))[launch][0]
        claimed = (await ledger.held("r1", [phone]))[phone][1]
    assert claimed is not None
    out = tmp_path / "report.html"
    result = await run(sb, "report", launch, "-o", str(out), "--journal", str(journal))
    assert result.code == 0, result.err
    page = out.read_text()
    sent = datetime.fromtimestamp(claimed, UTC)  # when its request was sent
    assert f'sent at</dt><dd><time class="sent">{sent:%Y-%m-%d %H:%M:%S} UTC' in page
    assert 'over 0 s"' not in page
    assert page.count("<polygon") >= 2  # queued from the run's start, then delivered
    assert poll.name in page
    assert 'data-step="accepted" data-n="5"' in page  # the run's funnel, from the ledger
    missing = await run(sb, "report", launch, "-o", str(out), "--journal", "typo.db")
    assert missing.code == ExitStatus.NO_LEDGER
    assert "no ledger at 'typo.db': the file does not exist" in missing.err


def right_edge(page: str, stage: str) -> float:
    """Where the chart's area of ``stage`` ends: the largest x at which it has
    a height (0.0 if it has none). An area is its top edge, then its bottom
    edge backwards, point for point."""
    [area] = re.findall(rf'class="area st-{stage}" points="([^"]*)"', page) or [""]
    points = [tuple(map(float, point.split(","))) for point in area.split()]
    half = len(points) // 2
    edges = zip(points[:half], reversed(points[half:]), strict=True)
    return max((top[0] for top, bottom in edges if bottom[1] - top[1] > 0.5), default=0.0)


async def test_a_report_made_later_charts_the_run_as_its_ledger_saw_it(
    sb: Sandbox, tmp_path: Path
) -> None:
    # A run followed to the end, its report made seconds later: the chart
    # moves people out of waiting when the ledger saw them move, not at the
    # report's reading (it drew them all waiting until then).
    await sb.set_clock(speed=20)
    journal = tmp_path / "runs.db"
    users = [User(cellphone=f"300222{i:04d}", country_code="+57") for i in range(5)]
    async with sb.client() as client:
        poll = (await client.list_polls())[0]
        report = await client.send_bulk(poll.id, users, journal=journal, run="r1", follow=True)
    await asyncio.sleep(3)
    out = tmp_path / "report.html"
    launch = report.launch_request_ids[0]
    argv = ("report", launch, "-o", str(out), "--journal", str(journal), "--no-wait")
    result = await run(sb, *argv)
    assert result.code == 0, result.err
    page = out.read_text()
    assert 0 < right_edge(page, "waiting") < 48 + 660 / 2  # the chart's left, half its width
    assert right_edge(page, "delivered") > 48 + 660 / 2


async def wait_for_line(proc: asyncio.subprocess.Process, start: str) -> str:
    assert proc.stdout is not None
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line, "the command exited early"
        if line.strip().startswith(start):
            return line.strip()


async def get_text(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        assert response.status == 200
        return await response.text()


async def stop(proc: asyncio.subprocess.Process) -> int:
    proc.send_signal(signal.SIGINT)
    try:
        return await asyncio.wait_for(proc.wait(), 15)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_dashboard_serves_the_launches_given(sb: Sandbox) -> None:
    launch = await send_one(sb)
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        "dashboard",
        "--port",
        "0",
        "--launch",
        launch,
        *sandbox_args(sb),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        url = (await wait_for_line(proc, "dashboard: ")).split()[1]
        assert launch in await get_text(url)
    finally:
        code = await stop(proc)
    assert code == 0


async def test_demo_with_the_dashboard_shows_its_campaign() -> None:
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        "demo",
        "--dashboard",
        "--dashboard-port",
        "0",
        "--speed",
        "20",
        "--users",
        "20",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        url = (await wait_for_line(proc, "dashboard: ")).split()[1]
        sent = await wait_for_line(
            proc, "queued by the service (HTTP 202 Accepted): launch_request_id "
        )
        await wait_for_line(proc, "The dashboard stays open")
        assert sent.split()[-1] in await get_text(url)
    finally:
        code = await stop(proc)
    assert code == 0


async def test_dashboard_lists_the_runs_of_its_journal(sb: Sandbox, tmp_path: Path) -> None:
    journal = tmp_path / "runs.db"
    async with sb.client() as client:
        poll = (await client.list_polls())[0]
        users = [User(cellphone=f"300222{i:04d}", country_code="+57") for i in range(3)]
        users.append(User(cellphone="3002229928", country_code="+57"))  # unable to contact
        await client.send_bulk(poll.id, users, journal=journal, run="spring", follow=True)
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        "dashboard",
        "--port",
        "0",
        "--journal",
        str(journal),
        *sandbox_args(sb),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        url = (await wait_for_line(proc, "dashboard: ")).split()[1]
        page = await get_text(url)
    finally:
        code = await stop(proc)
    assert code == 0
    assert 'data-run="spring"' in page
    assert f"{poll.name} (poll {poll.id})" in page
    # The run's funnel, from the outcomes follow=True wrote.
    assert 'data-step="planned" data-n="4"' in page
    assert 'data-step="accepted" data-n="4"' in page
    assert "<code>FAILURE_BY_UNABLE_TO_CONTACT</code>" in page


@pytest.mark.parametrize(
    ("token", "query", "without"),
    [
        ("cli-t0ken", "?token=cli-t0ken", 401),
        # An empty variable (compose's "${CAMPAIGNKIT_DASHBOARD_TOKEN}" of an
        # unset one) is no token: it was taken as "", printed as "?token=",
        # and nobody could open the page.
        ("", "", 200),
    ],
)
async def test_dashboard_with_a_token_prints_it_once_and_asks_for_it(
    sb: Sandbox, token: str, query: str, without: int
) -> None:
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        "dashboard",
        "--port",
        "0",
        *sandbox_args(sb),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "CAMPAIGNKIT_DASHBOARD_TOKEN": token},
    )
    try:
        url = (await wait_for_line(proc, "dashboard: ")).split()[1]
        async with aiohttp.ClientSession() as http, http.get(url.split("?")[0]) as response:
            status = response.status
        jar = aiohttp.CookieJar(unsafe=True)  # a browser keeps cookies of IP hosts too
        async with aiohttp.ClientSession(cookie_jar=jar) as browser, browser.get(url) as response:
            page = await response.text()
    finally:
        code = await stop(proc)
    assert code == 0
    assert url.endswith(f"/{query}")
    assert status == without
    assert "Campaigns" in page


@pytest.mark.parametrize("token", ["", "two words", "tab\there"])
async def test_a_token_nobody_could_show_is_refused(token: str) -> None:
    result = await subprocess("dashboard", "--token", token)
    assert result.code == 2
    assert "token must be visible ASCII" in result.err
    with pytest.raises(ValueError, match="token"):
        Access.for_bind("0.0.0.0", token)


async def test_report_stops_following_after_follow_for_and_writes_what_it_saw(
    sb: Sandbox, tmp_path: Path
) -> None:
    await sb.set_clock(speed=0.05)  # a campaign of minutes: still waiting when written
    launch = await send_one(sb)
    out = tmp_path / "report.html"
    result = await run(sb, "report", launch, "-o", str(out), "--follow-for", "1")
    assert result.code == 0, result.err
    page = out.read_text()
    assert launch in page
    assert re.search(r'data-state="(PENDING|CLAIMED)"', page)  # not followed to the end


async def test_report_of_a_whole_run_from_its_ledger(sb: Sandbox, tmp_path: Path) -> None:
    journal = str(tmp_path / "runs.db")
    # ..9928: FAILURE_BY_UNABLE_TO_CONTACT; chunks of 2: three launches.
    phones = ["5510000001", "5510000002", "5510009928", "5510019928", "5510000003"]
    users = tmp_path / "users.csv"
    users.write_text("country_code,cellphone\n" + "".join(f"+52,{p}\n" for p in phones))
    async with sb.client() as client:
        poll = (await client.list_polls())[0]
    bulk = ("--bulk", "--chunk-size", "2", "--journal", journal, "--run", "spring", "--follow")
    sent = await run(sb, "send", str(poll.id), str(users), *bulk)
    assert sent.code == 0, sent.err
    async with SqliteLedger(journal) as ledger:
        info = await ledger.run_info("spring")
        launches = {r.launch_request_id async for r in ledger.records("spring", [ACCEPTED])}
    assert info is not None
    assert len(launches) == 3
    out = tmp_path / "run.html"
    result = await run(sb, "report", "--run", "spring", "--journal", journal, "-o", str(out))
    assert result.code == 0, result.err
    assert f"report written to {out}" in result.err
    assert "run spring: 3 launches, 5 recipients" in result.out
    page = out.read_text()
    assert poll.name in page
    started = datetime.fromtimestamp(info.created, UTC)
    assert f"started {started:%Y-%m-%d %H:%M:%S} UTC" in page
    # the ledger's funnel, each share of the run's recipients
    assert 'data-step="accepted" data-n="5">accepted 5 (100% of recipients)' in page
    # Following stops once no one waits: sent (not yet confirmed) or delivered may vary.
    assert re.search(r'data-stage="failed" data-n="2" title="[^"]*">failed 2<', page)
    assert '<span class="share">40% of recipients</span>' in page  # the failed bar
    assert 'class="legend"' in page
    [failure] = re.findall(r'<tr data-failure="FAILURE_BY_UNABLE_TO_CONTACT">.*?</tr>', page)
    assert "the network could not reach the device" in failure
    assert "5510009928" in failure
    assert "5510019928" in failure
    for launch in launches:
        assert f'data-launch="{launch}"' in page
    assert '<a href="/launches/' not in page  # no page to open from a file
    areas = dict(re.findall(r'class="area st-([a-z]+)" points="([^"]*)"', page))
    assert {"waiting", "failed"} <= areas.keys()  # all waiting at the start, then the statuses
    assert all(len(points.split()) > 4 for points in areas.values())  # more than one sample
    assert "<script" not in page
    assert "http://" not in page
    argv = ("--json", "report", "--run", "spring", "--journal", journal, "-o", str(out))
    as_json = await run(sb, *argv)
    assert as_json.json() == {"run": "spring", "launches": 3, "output": str(out)}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ((), "give a launch_request_id or --run NAME (exactly one)"),
        (("lr-1", "--run", "spring", "--journal", "x.db"), "(exactly one)"),
        (("--run", "spring"), "report --run needs --journal"),
        (("--run", "spring", "--journal", "x.db", "--no-wait"), "not with --run"),
    ],
)
async def test_report_usage_errors(
    sb: Sandbox, tmp_path: Path, argv: tuple[str, ...], says: str
) -> None:
    result = await run(sb, "report", *argv, "-o", str(tmp_path / "r.html"))
    assert result.code == 2
    assert says in result.err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ("report", "--run", "spring", "-o", "r.html"),
        ("report", "lr-1", "--no-wait", "-o", "r.html"),
        ("dashboard", "--port", "0"),
    ],
)
async def test_a_ledger_that_does_not_exist_is_named_and_never_created(
    sb: Sandbox, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    typo = tmp_path / "typo.db"
    result = await run(sb, *argv, "--journal", str(typo))
    assert result.code == ExitStatus.NO_LEDGER, result.err
    assert f"no ledger at '{typo}': the file does not exist" in result.err
    assert not os.listdir(tmp_path)  # nor its -wal or -shm


async def test_report_of_a_run_the_ledger_does_not_have(sb: Sandbox, tmp_path: Path) -> None:
    journal = tmp_path / "runs.db"
    async with SqliteLedger(journal) as ledger:
        await ledger.start_run("other", "1")
    result = await run(
        sb, "report", "--run", "spring", "--journal", str(journal), "-o", str(tmp_path / "r.html")
    )
    assert result.code == 2
    assert f"--run spring: {journal} has no such run" in result.err
