"""The dashboard in a real browser: headless Chromium, driven over the Chrome
DevTools Protocol (a websocket: aiohttp is enough), watches a sandbox
campaign; the funnel on screen must end equal to the tracker's counts.

Where Chromium is missing the test is skipped in one line (it fails under
``CI``: ``.ci/run`` installs it). ``CAMPAIGNKIT_TEST_SCREENSHOT=path``
also writes the screenshot there (the README's is ``docs/dashboard.png``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import tenacity
from aiohttp import web
from helpers.real_servers import require_program
from helpers.servers import serving

from campaignkit import CampaignClient, User
from campaignkit.dashboard import DASHBOARD, Dashboard, dashboard_app, launch_stages
from campaignkit.ledger import SqliteLedger
from campaignkit.sandbox import Sandbox

from .test_app import FAST, Send, Settle
from .test_security import status_calls

pytestmark = pytest.mark.timeout(90)

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
)
SCREEN = """(() => {
  const count = (selector, key) => Object.fromEntries([...document.querySelectorAll(selector)]
    .map((el) => [el.dataset[key], Number(el.textContent)]));
  const live = document.querySelector("[data-events]");
  return {
    funnel: count("#funnel [data-stage]", "stage"),
    failures: count("#failures [data-reason]", "reason"),
    launches: [...document.querySelectorAll("tr[data-launch]")].map((row) => row.dataset.launch),
    runs: Object.fromEntries([...document.querySelectorAll("[data-run]")].map((run) =>
      [run.dataset.run, Number(run.querySelector("[data-stage=sent]")?.dataset.n || 0)])),
    followed: document.querySelectorAll("tr[data-launch] .stack").length,
    sent: document.querySelectorAll("tr[data-launch] time.sent").length,
    shares: [...document.querySelectorAll(".share, .step")].map((el) => el.textContent),
    watched: document.body.textContent.includes("watched since"),
    updates: Number(live ? live.dataset.updates || 0 : 0),
    marker: window.marker || null,
  };
})()"""

PATIENTLY = tenacity.AsyncRetrying(
    retry=tenacity.retry_if_exception_type(ValueError),
    wait=tenacity.wait_fixed(0.05),
    stop=tenacity.stop_after_delay(20),
    reraise=True,
)


def chromium() -> str:
    return shutil.which("chromium-browser") or require_program(
        "chromium", "apt-get install chromium chromium-driver"
    )


class Page:
    """One tab, over the browser's DevTools websocket (calls in turn; events ignored)."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._ids = itertools.count(1)
        self._session: str | None = None

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        message_id = next(self._ids)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params}
        if self._session is not None:
            message["sessionId"] = self._session
        await self._ws.send_json(message)
        async for frame in self._ws:
            answer = frame.json()
            if answer.get("id") == message_id:
                assert "error" not in answer, answer["error"]
                return dict(answer["result"])
        raise AssertionError("the DevTools websocket closed")

    async def open(self) -> None:
        target = await self.call("Target.createTarget", url="about:blank")
        attached = await self.call(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True
        )
        self._session = attached["sessionId"]
        await self.call(
            "Emulation.setDeviceMetricsOverride",
            width=1040,
            height=1180,
            deviceScaleFactor=1,
            mobile=False,
        )

    async def go(self, url: str) -> None:
        await self.call("Page.navigate", url=url)
        await self.screen(lambda s: s["marker"] is None)  # the new document
        await self.call("Runtime.evaluate", expression="window.marker = 'kept'")

    async def screen(self, until: Any, *, seconds: float = 20) -> dict[str, Any]:
        """The page's numbers, read every 50 ms until ``until`` accepts them."""
        for _ in range(int(seconds / 0.05)):
            value = await self.call("Runtime.evaluate", expression=SCREEN, returnByValue=True)
            state = dict(value["result"].get("value") or {})
            if state and until(state):
                return state
            await asyncio.sleep(0.05)
        raise AssertionError(f"the page never showed what was expected; last: {state}")


@contextlib.asynccontextmanager
async def headless_chromium(profile: Path) -> AsyncIterator[Page]:
    process = await asyncio.create_subprocess_exec(
        chromium(),
        *FLAGS,
        f"--user-data-dir={profile}",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        active = profile / "DevToolsActivePort"
        address: tuple[str, str] = await PATIENTLY(asyncio.to_thread, _lines, active)
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(f"ws://127.0.0.1:{address[0]}{address[1]}", max_msg_size=0) as ws,
        ):
            page = Page(ws)
            await page.open()
            yield page
    finally:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()


def _lines(path: Path) -> tuple[str, str]:
    port, ws_path = path.read_text().split()[:2] if path.exists() else ("", "")
    if not ws_path:
        raise ValueError("Chromium has not written its DevTools port yet")
    return port, ws_path


async def test_the_funnel_on_screen_ends_equal_to_the_tracker_counts(
    sandbox: Sandbox, client: CampaignClient, send: Send, settle: Settle, tmp_path: Path
) -> None:
    await sandbox.set_clock(speed=2)  # a campaign of a few seconds, watched live
    app = dashboard_app(Dashboard(client, **FAST))
    async with serving(app) as url, headless_chromium(tmp_path / "profile") as page:
        await page.go(f"{url}/")
        launch = await send()
        app[DASHBOARD].add(launch)
        listed = await page.screen(lambda s: s["launches"] == [launch])
        await page.go(f"{url}/launches/{launch}")
        first = await page.screen(lambda s: len(s["funnel"]) == 5)
        expected = launch_stages(await settle(launch))
        numbers = {stage.value: count for stage, count in expected.items()}
        last = await page.screen(
            lambda s: s["funnel"] == numbers and s["failures"] == dict(expected.failures)
        )
        shot = await page.call("Page.captureScreenshot", format="png")

    assert listed["marker"] == "kept"  # the list grew live, without a reload
    assert first["funnel"] != last["funnel"]  # loaded during the campaign
    assert last["marker"] == "kept"
    assert last["updates"] >= 1
    png = base64.b64decode(shot["data"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    for path in (tmp_path / "dashboard.png", os.environ.get("CAMPAIGNKIT_TEST_SCREENSHOT")):
        if path:
            await asyncio.to_thread(Path(path).write_bytes, png)


async def test_the_list_shows_a_bulk_run_as_one_row_with_its_launches(
    client: CampaignClient, users: list[User], tmp_path: Path
) -> None:
    poll = (await client.list_polls())[0]
    async with SqliteLedger(tmp_path / "runs.db") as ledger:
        report = await client.send_bulk(poll.id, users, chunk_size=10, journal=ledger, run="promo")
        dashboard = Dashboard(client, ledger=ledger, **FAST)
        async with (
            serving(dashboard_app(dashboard)) as url,
            headless_chromium(tmp_path / "profile") as page,
        ):
            for launch in report.launch_request_ids[:2]:
                await page.go(f"{url}/launches/{launch}")
            await page.go(f"{url}/")
            state = await page.screen(lambda s: s["runs"] == {"promo": len(users)})
            shot = await page.call("Page.captureScreenshot", format="png")
    assert state["launches"] == report.launch_request_ids
    assert state["followed"] == 2
    # Each launch says when it was sent (not when the dashboard began watching it).
    assert (state["sent"], state["watched"]) == (len(report.launch_request_ids), False)
    # Every share names its base; nobody followed the run: "not followed", not "delivered 0".
    shares = [text for text in state["shares"] if "%" in text]
    assert shares
    assert all("% of recipients" in text for text in shares), shares
    assert "delivered: not followed" in state["shares"]
    png = base64.b64decode(shot["data"])
    for path in (tmp_path / "list.png", os.environ.get("CAMPAIGNKIT_TEST_SCREENSHOT_LIST")):
        if path:
            await asyncio.to_thread(Path(path).write_bytes, png)


async def test_another_sites_page_cannot_make_the_dashboard_follow_anything(
    sandbox: Sandbox, client: CampaignClient, send: Send, tmp_path: Path
) -> None:
    launch = await send()
    dashboard = Dashboard(client, **FAST)
    async with serving(dashboard_app(dashboard)) as url:
        target = f"{url}/launches/{launch}"
        evil = web.Application()

        async def attacking_page(_: web.Request) -> web.Response:
            return web.Response(text=attack(target), content_type="text/html")

        evil.router.add_get("/", attacking_page)
        before = await status_calls(sandbox)
        async with (
            serving(evil, host="localhost") as evil_url,
            headless_chromium(tmp_path / "profile") as page,
        ):
            await page.call("Page.navigate", url=f"{evil_url}/")
            await asyncio.sleep(2)  # the page's requests made (its form navigates away)
        asked = await status_calls(sandbox) - before
    assert dashboard.followed == 0
    assert asked == 0


def attack(target: str) -> str:
    """A page of another site that asks the dashboard for a launch every way
    it can without the visitor's consent."""
    return (
        "<!doctype html><body>"
        + "".join(f'<img src="{target}?n={n}">' for n in range(20))
        + f'<iframe src="{target}"></iframe>'
        + f'<form method="post" action="{target}"></form>'
        + "<script>"
        f'fetch("{target}", {{mode: "no-cors"}});'
        f'new EventSource("{target}/events");'
        "document.forms[0].submit();"
        "</script></body>"
    )
