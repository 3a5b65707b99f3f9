"""The dashboard app over real HTTP against the sandbox."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import pytest
from helpers.servers import serving

from campaignkit import CampaignClient, DeploymentStatus, User
from campaignkit.dashboard import (
    DASHBOARD,
    Dashboard,
    dashboard_app,
    launch_stages,
    sandbox_launches,
)
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(40)

FAST: dict[str, Any] = {"poll_interval": 0.05, "max_interval": 0.2, "discover_every": 0.1}
Send = Callable[[], Awaitable[str]]
Settle = Callable[[str], Awaitable[Counter[DeploymentStatus | None]]]


async def read_events(
    http: aiohttp.ClientSession, url: str, until: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """The events of ``url`` up to the first one ``until`` accepts."""
    events = []
    async with asyncio.timeout(20), http.get(url) as response:
        assert response.content_type == "text/event-stream"
        async for line in response.content:
            if line.startswith(b"data: "):
                events.append(orjson.loads(line[6:]))
                if until(events[-1]):
                    return events
    raise AssertionError(f"the stream ended after {len(events)} events")


async def test_a_launch_stream_follows_the_campaign_to_the_tracker_counts(
    client: CampaignClient, send: Send, settle: Settle
) -> None:
    launch = await send()
    async with (
        serving(dashboard_app(Dashboard(client, **FAST))) as url,
        aiohttp.ClientSession() as http,
    ):
        stream = asyncio.create_task(
            read_events(http, f"{url}/launches/{launch}/events", lambda e: e["state"] == "DONE")
        )
        expected = launch_stages(await settle(launch)).to_json()
        first_done = (await stream)[-1]
        events = await read_events(
            http, f"{url}/launches/{launch}/events", lambda e: e["funnel"] == expected
        )
        async with http.get(f"{url}/launches/{launch}") as response:
            page = await response.text()

    assert first_done["funnel"]["total"] == expected["total"]
    html = events[-1]["html"]
    assert set(html) == {"summary", "funnel", "chart", "failures"}
    for stage in ("waiting", "sent", "delivered", "failed", "unknown"):
        assert f'data-stage="{stage}">{expected[stage]}<' in html["funnel"]
        assert f'data-stage="{stage}">{expected[stage]}<' in page
    assert "<svg" in html["chart"]
    assert "<polygon" in html["chart"]
    assert f'data-events="/launches/{launch}/events"' in page


async def test_the_first_event_comes_before_any_poll_then_updates_follow(
    client: CampaignClient, send: Send
) -> None:
    launch = await send()
    async with (
        serving(dashboard_app(Dashboard(client, **FAST))) as url,
        aiohttp.ClientSession() as http,
    ):
        events = await read_events(
            http, f"{url}/launches/{launch}/events", lambda e: e["state"] == "DONE"
        )
    assert events[0]["state"] is None
    assert events[0]["funnel"]["total"] == 0
    assert len(events) >= 2


async def test_the_list_shows_the_sandbox_launches_of_its_company(
    sandbox: Sandbox, client: CampaignClient, send: Send, users: list[User]
) -> None:
    other = await sandbox.add_company()
    async with CampaignClient(
        other["api_key"], base_url=sandbox.base_url, campaign_url=sandbox.campaign_url
    ) as other_client:
        polls = await other_client.list_polls()
        await other_client.send_campaign(polls[0].id, users[:2])
    discover = sandbox_launches(sandbox.admin_url, sandbox.api_key)
    app = dashboard_app(Dashboard(client, discover=discover, **FAST))
    async with serving(app) as url, aiohttp.ClientSession() as http:
        before = await read_events(http, f"{url}/events", lambda e: True)
        first, second = await send(), await send()
        events = await read_events(http, f"{url}/events", lambda e: len(e["launches"]) == 2)
        async with http.get(f"{url}/") as response:
            page = await response.text()
    assert before[0]["launches"] == []
    assert [row["launch_request_id"] for row in events[-1]["launches"]] == [second, first]
    assert f'href="/launches/{first}"' in page
    assert f'href="/launches/{second}"' in page


async def test_a_launch_given_or_added_is_listed(client: CampaignClient, send: Send) -> None:
    first, second = await send(), await send()
    app = dashboard_app(Dashboard(client, launches=[first], **FAST))
    async with serving(app) as url, aiohttp.ClientSession() as http:
        app[DASHBOARD].add(second)
        events = await read_events(http, f"{url}/events", lambda e: True)
    assert [row["launch_request_id"] for row in events[0]["launches"]] == [second, first]


async def test_the_report_of_a_watched_launch_is_an_attachment(
    client: CampaignClient, send: Send, settle: Settle
) -> None:
    launch = await send()
    expected = launch_stages(await settle(launch))
    async with (
        serving(dashboard_app(Dashboard(client, **FAST))) as url,
        aiohttp.ClientSession() as http,
    ):
        await read_events(
            http, f"{url}/launches/{launch}/events", lambda e: e["funnel"] == expected.to_json()
        )
        async with http.get(f"{url}/launches/{launch}/report.html") as response:
            disposition = response.headers["Content-Disposition"]
            page = await response.text()
    assert disposition == f'attachment; filename="campaign-{launch}.html"'
    assert f'data-stage="delivered">{expected.delivered}<' in page
    assert "<script" not in page


async def test_assets_come_from_the_package(client: CampaignClient) -> None:
    async with serving(dashboard_app(Dashboard(client))) as url, aiohttp.ClientSession() as http:
        async with http.get(f"{url}/static/dashboard.js") as response:
            script = await response.text()
            script_type = response.content_type
        async with http.get(f"{url}/static/dashboard.css") as response:
            style_type = response.content_type
        async with http.get(f"{url}/static/secret.txt") as response:
            missing = response.status
    assert "EventSource" in script
    assert script_type == "text/javascript"
    assert style_type == "text/css"
    assert missing == 404


async def test_open_streams_do_not_hold_the_server_at_shutdown(
    client: CampaignClient, send: Send
) -> None:
    launch = await send()
    async with aiohttp.ClientSession() as http:
        async with serving(dashboard_app(Dashboard(client, **FAST))) as url:
            streams = [
                await http.get(f"{url}/events"),
                await http.get(f"{url}/launches/{launch}/events"),
            ]
            started = time.monotonic()
        stopped = time.monotonic() - started
        for stream in streams:
            async with asyncio.timeout(5):
                await stream.read()
            stream.release()
    assert stopped < 3


async def test_a_launch_the_service_does_not_know_is_not_found(
    client: CampaignClient,
) -> None:
    async with (
        serving(dashboard_app(Dashboard(client))) as url,
        aiohttp.ClientSession() as http,
        http.get(f"{url}/launches/no-such-launch/report.html") as response,
    ):
        status, text = response.status, await response.text()
    assert status == 404
    assert "no-such-launch" in text
