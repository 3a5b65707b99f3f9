"""``campaignkit dashboard``, ``report`` and ``demo --dashboard``."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import aiohttp
import pytest
from helpers.cli import SCRIPT, run, sandbox_args

from campaignkit import User
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
        sent = await wait_for_line(proc, "202 accepted: launch_request_id ")
        await wait_for_line(proc, "The dashboard stays open")
        assert sent.split()[-1] in await get_text(url)
    finally:
        code = await stop(proc)
    assert code == 0
