"""The download of a bulk run's report from its row of the dashboard: the
link, the attachment read from the ledger, an unknown run, the token; over
real HTTP against the sandbox."""

from __future__ import annotations

import re
from html import escape, unescape
from pathlib import Path

import aiohttp
import pytest
from helpers.servers import serving

from campaignkit import CampaignClient, User
from campaignkit.dashboard import Access, Dashboard, dashboard_app
from campaignkit.ledger import Ledger, SqliteLedger

from .test_app import FAST
from .test_listing import section

pytestmark = pytest.mark.timeout(60)

RUN = "spring promo/2"
"""A run name that needs percent-encoding in a link (a space, a slash)."""


async def test_a_runs_row_downloads_its_report_with_its_poll_and_launches(
    client: CampaignClient, ledger: Ledger, users: list[User]
) -> None:
    poll = (await client.list_polls())[0]
    sent = await client.send_bulk(poll.id, users, chunk_size=15, journal=ledger, run=RUN)
    async with (
        serving(dashboard_app(Dashboard(client, ledger=ledger, **FAST))) as url,
        aiohttp.ClientSession() as http,
    ):
        async with http.get(f"{url}/") as response:
            row = section(await response.text(), f'<section class="run" data-run="{RUN}">')
        links = re.findall(r'<a href="([^"]+)">Download the report</a>', row)
        assert links == ["/runs/spring%20promo%2F2/report.html"]
        async with http.get(url + unescape(links[0])) as response:
            status, headers, page = response.status, response.headers, await response.text()
    assert status == 200
    assert headers["Content-Disposition"] == 'attachment; filename="run-spring_promo_2.html"'
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert "script-src" not in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "<script" not in page
    assert f"<code>{escape(RUN)}</code>" in page
    assert f"{escape(poll.name)} (poll {poll.id})" in page  # the name the list learnt
    assert len(sent.launch_request_ids) == 3
    for launch in sent.launch_request_ids:
        assert f'data-launch="{launch}"' in page
    assert "/launches/" not in page  # the file links nowhere


async def test_a_run_the_ledger_does_not_hold_is_not_found(
    client: CampaignClient, ledger: Ledger
) -> None:
    async with (
        serving(dashboard_app(Dashboard(client, ledger=ledger))) as url,
        aiohttp.ClientSession() as http,
        http.get(f"{url}/runs/no%20such%20run/report.html") as response,
    ):
        status, text = response.status, await response.text()
    assert status == 404
    assert "'no such run'" in text


async def test_with_a_token_the_runs_report_needs_it(
    client: CampaignClient, ledger: Ledger, users: list[User]
) -> None:
    poll = (await client.list_polls())[0]
    await client.send_bulk(poll.id, users[:3], journal=ledger, run="r")
    token = "s3cret-token"
    app = dashboard_app(Dashboard(client, ledger=ledger), Access(token))
    async with serving(app) as url:
        async with (
            aiohttp.ClientSession() as stranger,
            stranger.get(f"{url}/runs/r/report.html", allow_redirects=False) as response,
        ):
            refused = response.status, await response.text()
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
            async with browser.get(f"{url}/?token={token}") as response:
                assert 'href="/runs/r/report.html"' in await response.text()
            async with browser.get(f"{url}/runs/r/report.html") as response:
                allowed = response.status, response.headers["Content-Disposition"]
    assert refused[0] == 401
    assert "<code>r</code>" not in refused[1]
    assert allowed == (200, 'attachment; filename="run-r.html"')


async def test_a_ledger_that_fails_is_answered_503_in_words(
    client: CampaignClient, tmp_path: Path, users: list[User]
) -> None:
    # The list and a run's report read the ledger: one that fails (here
    # closed under the dashboard) is a 503 saying so, not a bare 500.
    poll = (await client.list_polls())[0]
    ledger = SqliteLedger(tmp_path / "closed.db")
    async with ledger:
        await client.send_bulk(poll.id, users[:3], journal=ledger, run="r")
    async with (
        serving(dashboard_app(Dashboard(client, ledger=ledger))) as url,
        aiohttp.ClientSession() as http,
    ):
        for path in ("/", "/runs/r/report.html"):
            async with http.get(url + path) as response:
                status, text = response.status, await response.text()
            assert status == 503, path
            assert "the dashboard's ledger could not be read" in text, path
