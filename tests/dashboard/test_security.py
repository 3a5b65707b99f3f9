"""Who may use the dashboard and how much one visitor can make it do (issue 18
point 3): bounded following, unknown ids, other sites' requests, the Host
check, the token and the headers, over real HTTP against the sandbox."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import aiohttp
import pytest
from helpers.servers import serving

from campaignkit import CampaignClient
from campaignkit.dashboard import (
    DASHBOARD,
    Access,
    Dashboard,
    dashboard_app,
    running_dashboard,
)
from campaignkit.sandbox import Sandbox

from .test_app import FAST, Send

pytestmark = pytest.mark.timeout(60)

IMG = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
LINK = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}


async def status_calls(sandbox: Sandbox) -> int:
    """Campaign status requests the sandbox has answered since it started."""
    faults = await sandbox.admin("GET", "/faults")
    return int(faults["requests"].get("campaign_status", 0))


async def test_3000_unknown_ids_cost_one_status_call_each_and_follow_nothing(
    sandbox: Sandbox, client: CampaignClient
) -> None:
    dashboard = Dashboard(client, **FAST)
    async with (
        serving(dashboard_app(dashboard)) as url,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=32)) as http,
    ):
        before = await status_calls(sandbox)

        async def visit(_: int) -> int:
            async with http.get(f"{url}/launches/{secrets.token_hex(12)}") as response:
                return response.status

        statuses = await asyncio.gather(*map(visit, range(3000)))
        after = await status_calls(sandbox)
        await asyncio.sleep(0.5)  # nothing keeps polling them afterwards
        later = await status_calls(sandbox)
        async with http.get(f"{url}/launches/{'x' * 300}") as response:
            too_long = response.status
        unasked = await status_calls(sandbox)

    assert set(statuses) == {404}
    assert dashboard.followed == 0
    assert after - before == 3000
    assert later == after
    assert too_long == 404
    assert unasked == later  # an id that cannot be one is not asked about


async def test_at_most_max_followed_launches_are_followed_the_least_recently_viewed_dropped(
    sandbox: Sandbox, client: CampaignClient, send: Send
) -> None:
    first, second, third = await send(), await send(), await send()
    dashboard = Dashboard(client, max_followed=2, **FAST)
    async with serving(dashboard_app(dashboard)) as url, aiohttp.ClientSession() as http:
        for launch in (first, second, first, third):  # second is the least recently viewed
            async with http.get(f"{url}/launches/{launch}") as response:
                assert response.status == 200
        dropped = dashboard.get(second)
        listed = [s.launch_request_id for s in dashboard.summaries()]
        await asyncio.sleep(0.3)
        quiet_from = await status_calls(sandbox)
        kept = [dashboard.get(first), dashboard.get(third)]
        for watch in kept:
            assert watch is not None
            await watch.close()
        await asyncio.sleep(0.5)
        quiet_to = await status_calls(sandbox)

    assert dashboard.followed == 2
    assert dropped is None
    assert sorted(listed) == sorted([first, third])
    assert quiet_to - quiet_from <= 1  # the dropped launch's tracker was closed


async def test_a_dropped_launchs_event_stream_ends(client: CampaignClient, send: Send) -> None:
    first, second = await send(), await send()
    dashboard = Dashboard(client, max_followed=1, **FAST)
    async with (
        serving(dashboard_app(dashboard)) as url,
        aiohttp.ClientSession() as http,
        asyncio.timeout(10),
        http.get(f"{url}/launches/{first}/events") as stream,
    ):
        await stream.content.readline()
        async with http.get(f"{url}/launches/{second}") as response:
            assert response.status == 200
        await stream.read()  # the stream ends instead of idling for good
    assert dashboard.get(first) is None


async def test_other_sites_requests_start_no_work(
    sandbox: Sandbox, client: CampaignClient, send: Send
) -> None:
    launch = await send()
    dashboard = Dashboard(client, **FAST)
    async with serving(dashboard_app(dashboard)) as url, aiohttp.ClientSession() as http:
        before = await status_calls(sandbox)
        answers = {}
        for name, method, headers in [
            ("img", "GET", IMG),
            ("fetch", "GET", {"Origin": "http://evil.example", "Sec-Fetch-Mode": "cors"}),
            ("same-site", "GET", {**IMG, "Sec-Fetch-Site": "same-site"}),
            ("iframe", "GET", {**LINK, "Sec-Fetch-Dest": "iframe"}),
            ("form", "POST", {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}),
            ("null origin", "POST", {"Origin": "null"}),
            ("cross-site post", "POST", {"Sec-Fetch-Site": "cross-site"}),
        ]:
            for path in (f"/launches/{launch}", f"/launches/{launch}/events", "/"):
                async with http.request(method, url + path, headers=headers) as response:
                    answers[name, path] = response.status
        asked = await status_calls(sandbox) - before
        followed = dashboard.followed
        async with http.get(f"{url}/launches/{launch}", headers=LINK) as response:
            link = response.status

    assert {k: v for k, v in answers.items() if v != 403} == {}
    assert asked == 0
    assert followed == 0
    assert link == 200  # a link followed from elsewhere still shows the page


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("evil.example", 421),
        ("evil.example:{port}", 421),
        ("localhost:{port}", 200),
        ("127.0.0.1:{port}", 200),
        ("[::1]:{port}", 200),
        ("dashboard.internal:{port}", 200),
        ("", 421),
    ],
)
async def test_the_host_header_must_name_this_server(
    client: CampaignClient, host: str, expected: int
) -> None:
    app = dashboard_app(Dashboard(client), Access(hosts={"Dashboard.Internal"}))
    async with serving(app) as url, aiohttp.ClientSession() as http:
        port = url.rsplit(":", 1)[1]
        headers = {"Host": host.format(port=port)}
        async with http.get(f"{url}/", headers=headers) as response:
            assert response.status == expected


async def test_a_token_is_shown_by_header_cookie_or_one_visit_of_the_query(
    client: CampaignClient,
) -> None:
    token = "s3cret-token"
    app = dashboard_app(Dashboard(client), Access(token))
    async with serving(app) as url:
        answers: dict[str, Any] = {}
        async with aiohttp.ClientSession() as http:
            for name, headers in [
                ("none", {}),
                ("wrong", {"Authorization": "Bearer nope"}),
                ("bearer", {"Authorization": f"Bearer {token}"}),
            ]:
                async with http.get(f"{url}/static/dashboard.css", headers=headers) as response:
                    answers[name] = response.status
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
            async with browser.get(f"{url}/?token={token}", allow_redirects=False) as response:
                answers["query"] = response.status, response.headers["Location"]
                cookie = response.headers["Set-Cookie"]
            async with browser.get(f"{url}/") as response:
                answers["cookie"] = response.status
                page = await response.text()
        async with (
            aiohttp.ClientSession() as stranger,
            stranger.get(f"{url}/?token=wrong", allow_redirects=False) as response,
        ):
            answers["wrong query"] = response.status

    assert answers["none"] == 401
    assert answers["wrong"] == 401
    assert answers["bearer"] == 200
    assert answers["query"] == (303, "/")
    assert "HttpOnly" in cookie
    assert "SameSite=Lax" in cookie
    assert answers["cookie"] == 200
    assert token not in page
    assert answers["wrong query"] == 401


def test_beyond_loopback_a_token_is_required_and_generated() -> None:
    assert Access.for_bind("127.0.0.1").token is None
    assert Access.for_bind("::1").token is None
    assert Access.for_bind("localhost").token is None
    wide, other = Access.for_bind("0.0.0.0"), Access.for_bind("0.0.0.0")
    assert wide.token is not None
    assert other.token is not None
    assert wide.token != other.token
    assert len(wide.token) >= 32
    assert Access.for_bind("10.1.2.3", "given").token == "given"
    assert "given" not in repr(Access.for_bind("10.1.2.3", "given"))


async def test_a_dashboard_with_a_token_prints_it_once_in_its_address(
    client: CampaignClient,
) -> None:
    async with (
        running_dashboard(Dashboard(client), port=0, token="t0ken") as dashboard,
        aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http,
    ):
        assert dashboard.url is not None
        assert dashboard.url.endswith("/?token=t0ken")
        async with http.get(dashboard.url) as response:
            status = response.status
        async with http.get(dashboard.url.split("?")[0]) as response:
            kept = response.status
    assert (status, kept) == (200, 200)


async def test_every_answer_carries_the_security_headers(
    client: CampaignClient, send: Send
) -> None:
    launch = await send()
    app = dashboard_app(Dashboard(client, **FAST))
    async with serving(app) as url, aiohttp.ClientSession() as http:
        found = {}
        for path in ("/", f"/launches/{launch}", "/launches/nope", "/static/dashboard.js"):
            async with http.get(url + path) as response:
                found[path] = response.headers
        async with http.get(f"{url}/launches/{launch}/report.html") as response:
            report = response.headers
        app[DASHBOARD].signal.bump()
    for headers in found.values():
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["Referrer-Policy"] == "no-referrer"
    assert "script-src" not in report["Content-Security-Policy"]
    assert "default-src 'none'" in report["Content-Security-Policy"]


def test_launches_given_beyond_the_bound_keep_the_last_ones(client: CampaignClient) -> None:
    dashboard = Dashboard(client, launches=[f"l{i}" for i in range(5)], max_followed=3)
    assert [s.launch_request_id for s in dashboard.summaries()] == ["l4", "l3", "l2"]
    with pytest.raises(ValueError, match="max_followed"):
        Dashboard(client, max_followed=0)


async def test_error_pages_never_show_the_key(sandbox: Sandbox, client: CampaignClient) -> None:
    # The 404 and 502 pages quoted the id asked for as is: a visit of
    # /launches/<the key> showed it back.
    key = client.config.api_key
    pages = {}
    async with (
        serving(dashboard_app(Dashboard(client, **FAST))) as url,
        aiohttp.ClientSession() as http,
    ):
        for path in (
            f"/launches/{key}",
            f"/launches/{key}/report.html",
            f"/runs/{key}/report.html",
        ):
            async with http.get(url + path) as response:
                pages[path] = (response.status, await response.text())
        await sandbox.set_faults({"kind": "500", "route": "campaign_status"})
        async with http.get(f"{url}/launches/{key}") as response:
            pages["502"] = (response.status, await response.text())
    assert [status for status, _ in pages.values()] == [404, 404, 404, 502]
    assert all(key not in text and "***" in text for _, text in pages.values())
