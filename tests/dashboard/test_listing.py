"""Which campaign is which (issue 22 point 2): poll names, start times,
percentages with a legend, paging, bulk runs grouped from a ledger, failures
in words with the phones behind each; over real HTTP against the sandbox."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import escape

import aiohttp
import pytest
from helpers.servers import serving

from campaignkit import CampaignClient, DeploymentStatus, User
from campaignkit.dashboard import Dashboard, dashboard_app, launch_stages
from campaignkit.ledger import Ledger
from campaignkit.progress import failure_words

from .test_app import FAST, Send, Settle, read_events

pytestmark = pytest.mark.timeout(60)


async def claimed_at(ledger: Ledger, run: str, launch: str) -> datetime:
    """When the ledger's claim of the launch's request was taken."""
    phone = (await ledger.launch_phones(run, [launch]))[launch][0]
    claimed = (await ledger.held(run, [phone]))[phone][1]
    assert claimed is not None
    return datetime.fromtimestamp(claimed, UTC)


async def get(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url) as response:
        assert response.status == 200, await response.text()
        return await response.text()


def section(page: str, marker: str) -> str:
    """The ``<section>`` of ``page`` that starts with ``marker``."""
    start = page.index(marker)
    return page[start : page.index("</section>", start)]


async def test_a_bulk_run_is_one_row_with_its_poll_start_shares_and_launches(
    client: CampaignClient, ledger: Ledger, users: list[User], send: Send
) -> None:
    poll = (await client.list_polls())[0]
    report = await client.send_bulk(poll.id, users, chunk_size=15, journal=ledger, run="promo")
    alone = await send()
    dashboard = Dashboard(client, ledger=ledger, launches=[alone], **FAST)
    followed = report.launch_request_ids[0]
    async with serving(dashboard_app(dashboard)) as url, aiohttp.ClientSession() as http:
        await get(http, f"{url}/launches/{followed}")
        page = await get(http, f"{url}/")
        report_page = await get(http, f"{url}/launches/{followed}/report.html")
    sent = await claimed_at(ledger, "promo", followed)
    assert f'sent at</dt><dd><time class="sent">{sent:%Y-%m-%d %H:%M:%S} UTC' in report_page

    run = section(page, '<section class="run" data-run="promo">')
    assert len(report.launch_request_ids) == 3
    assert f"{poll.name} (poll {poll.id})" in run
    assert f"{len(users)} recipients" in run
    assert f'data-stage="sent" data-n="{len(users)}"' in run
    assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", run)
    for launch in report.launch_request_ids:
        assert f'data-launch="{launch}"' in run
    # the third is followed: its row has its stages
    assert run.count("not followed: open it to follow it") == 2
    launches = section(page, "<section><h2>Launches</h2>")
    assert f'data-launch="{alone}"' in launches
    assert not any(launch in launches for launch in report.launch_request_ids)
    for stage in ("waiting", "sent", "delivered", "failed", "unknown"):
        assert f"<b>{stage}</b>: " in page  # the legend


async def test_a_followed_run_shows_its_people_per_stage_as_its_outcomes_say(
    client: CampaignClient, ledger: Ledger, users: list[User]
) -> None:
    # One vocabulary (issue 22 point 6): once the ledger knows what became of
    # the recipients, the run's row says so; it said "sent 100%" (sent: "not
    # confirmed yet") beside the failures its own funnel listed.
    poll = (await client.list_polls())[0]
    report = await client.send_bulk(poll.id, users, journal=ledger, run="promo", follow=True)
    outcomes = report.funnel
    assert outcomes is not None
    failed = sum(outcomes.failed.values())
    sent = len(users) - outcomes.delivered - failed
    assert failed
    assert outcomes.delivered
    dashboard = Dashboard(client, ledger=ledger, **FAST)
    async with serving(dashboard_app(dashboard)) as url, aiohttp.ClientSession() as http:
        run = section(await get(http, f"{url}/"), '<section class="run" data-run="promo">')
    shares = dict(re.findall(r'class="stage" data-stage="(\w+)" data-n="(\d+)"', run))
    assert shares == {
        stage: str(n)
        for stage, n in (("sent", sent), ("delivered", outcomes.delivered), ("failed", failed))
        if n
    }
    for status, n in outcomes.failed.items():  # each said once, in words
        assert run.count(f"<br>{n} {escape(failure_words(status))} <code>{status}</code>") == 1


async def test_the_list_pages_through_every_launch(
    client: CampaignClient, users: list[User]
) -> None:
    poll = (await client.list_polls())[0].id
    sent = [(await client.send_campaign(poll, users[:1])).launch_request_id for _ in range(23)]
    dashboard = Dashboard(client, launches=sent, **FAST)
    async with serving(dashboard_app(dashboard)) as url, aiohttp.ClientSession() as http:
        first, second = await get(http, f"{url}/"), await get(http, f"{url}/?page=2")
        odd = await get(http, f"{url}/?page=x")
        events = await read_events(http, f"{url}/events?page=2", lambda e: True)

    def rows(page: str) -> list[str]:
        return re.findall(r'<tr data-launch="([^"]+)"', page)

    newest_first = sent[::-1]
    assert rows(first) == newest_first[:20]
    assert rows(second) == newest_first[20:]
    assert 'href="/?page=2" rel="next"' in first
    assert 'href="/?page=1" rel="prev"' in second
    assert "page 2 of 2" in second
    assert rows(odd) == rows(first)
    assert [e["launch_request_id"] for e in events[0]["launches"]] == newest_first[20:]


async def test_failures_are_in_words_with_the_phones_behind_each(
    client: CampaignClient, send: Send, settle: Settle
) -> None:
    launch = await send()
    expected = launch_stages(await settle(launch))
    status = await client.get_campaign_status(launch)
    poll = {p.id: p.name for p in await client.list_polls()}[status.poll_id]
    async with (
        serving(dashboard_app(Dashboard(client, **FAST))) as url,
        aiohttp.ClientSession() as http,
    ):
        await read_events(
            http, f"{url}/launches/{launch}/events", lambda e: e["funnel"] == expected.to_json()
        )
        page = await get(http, f"{url}/launches/{launch}")

    assert expected.failures
    assert f"<h1>{poll} <code>{launch}</code></h1>" in page
    failures = page[page.index('<table class="failures">') :]
    for reason, count in expected.failures:
        words = failure_words(reason)
        assert words == DeploymentStatus(reason).description
        item = failures[failures.index(escape(words)) :]
        item = item[: item.index("</tr>")]
        assert f'data-reason="{reason}">{count}<' in item
        phones = [d.cellphone for d in status.deployments if d.status == DeploymentStatus(reason)]
        assert phones
        for phone in phones:
            assert phone in item
    assert f"delivered</dt><dd>{expected.delivered} (" in page


async def test_every_discovered_launch_is_listed_the_newest_followed(
    client: CampaignClient, users: list[User]
) -> None:
    poll = (await client.list_polls())[0].id
    sent = [(await client.send_campaign(poll, users[:1])).launch_request_id for _ in range(30)]

    async def discover() -> list[str]:
        return sent

    dashboard = Dashboard(client, discover=discover, discover_limit=5, **FAST)
    async with serving(dashboard_app(dashboard)) as url, aiohttp.ClientSession() as http:
        first, second = await get(http, f"{url}/"), await get(http, f"{url}/?page=2")

    newest_first = sent[::-1]
    assert re.findall(r'<tr data-launch="([^"]+)"', first) == newest_first[:20]
    assert re.findall(r'<tr data-launch="([^"]+)"', second) == newest_first[20:]
    assert first.count("not followed") == 15
    assert dashboard.followed == 5


async def test_a_paused_run_says_who_paused_it_with_its_figures_and_how_to_resume_it(
    client: CampaignClient, ledger: Ledger, users: list[User]
) -> None:
    poll = (await client.list_polls())[0]
    await client.send_bulk(poll.id, users[:3], journal=ledger, run="promo")
    figures = "12% of 500 settled recipients failed (60): over the breaker's max_failed of 0.1"
    await ledger.pause_run("promo", "breaker", figures)
    dashboard = Dashboard(client, ledger=ledger, journal="runs.db", **FAST)
    async with serving(dashboard_app(dashboard)) as url, aiohttp.ClientSession() as http:
        run = section(await get(http, f"{url}/"), '<section class="run" data-run="promo">')
    assert '<div class="paused" data-paused-by="breaker"><p><b>paused</b> by the breaker at' in run
    assert escape(figures) in run
    assert "<code>campaignkit runs promo --journal runs.db --resume</code>" in run
    await ledger.resume_run("promo")
    async with serving(dashboard_app(dashboard)) as url, aiohttp.ClientSession() as http:
        run = section(await get(http, f"{url}/"), '<section class="run" data-run="promo">')
    assert "paused" not in run
