"""The clock admin route, outcome selection, and the ``python -m`` entry point."""

from __future__ import annotations

import asyncio
import http
import sys
from typing import Any

import aiohttp
import pytest

from campaignkit.sandbox import Sandbox
from campaignkit.sandbox._outcomes import DEFAULT_OUTCOME, INVALID_PHONE, outcome_for

pytestmark = pytest.mark.timeout(15)


@pytest.mark.parametrize(
    ("cellphone", "outcome"),
    [
        ("5510009900", 0),
        ("5510009929", 29),
        ("5510009930", DEFAULT_OUTCOME),
        ("5510001234", DEFAULT_OUTCOME),
        ("9905", 5),
        ("905", DEFAULT_OUTCOME),
        ("55-1234", INVALID_PHONE),
    ],
)
def test_outcome_for(cellphone: str, outcome: int) -> None:
    assert outcome_for(cellphone) == outcome


async def test_clock_set_speed_and_advance(api: Any, sb: Sandbox) -> None:
    clock = await sb.set_clock(now=1_900_000_000, speed=1e-6)
    assert clock["now"] == pytest.approx(1_900_000_000, abs=0.01)
    clock = await sb.set_clock(advance=60)
    assert clock["now"] == pytest.approx(1_900_000_060, abs=0.01)
    assert clock["speed"] == 1e-6
    for body in ({"speed": 0}, {"now": "soon"}, {"advance": True}):
        answer = await api.call("PUT", f"{sb.admin_url}/clock", json=body)
        assert (answer.status, sorted(answer.body)) == (400, ["error", "message"])


async def test_admin_bad_bodies(api: Any, sb: Sandbox) -> None:
    bad = [
        ("POST", "/companies", {"lines": []}),
        ("PUT", f"/companies/{sb.company_id}/webhook", {"url": "ftp://x"}),
        ("POST", f"/companies/{sb.company_id}/sessions", {"poll_id": 1001, "count": 0}),
        ("POST", "/reply", {"text": "no cellphone"}),
    ]
    for method, path, body in bad:
        answer = await api.call(method, sb.admin_url + path, json=body)
        assert answer.status == 400, path
    missing = await api.call("PUT", f"{sb.admin_url}/companies/nope/webhook", json={"url": None})
    assert missing.status == 404


async def test_the_helpers_raise_the_sandbox_message(sb: Sandbox) -> None:
    with pytest.raises(aiohttp.ClientResponseError) as raised:
        await sb.set_clock(speed=0)
    assert (raised.value.status, raised.value.message) == (400, "speed must be > 0")


@pytest.mark.parametrize("sandbox_options", [{"max_body_size": 1024}])
async def test_an_error_without_a_json_body_keeps_its_reason(sb: Sandbox) -> None:
    with pytest.raises(aiohttp.ClientResponseError) as raised:
        await sb.fail_prefix("+57" + "0" * 2000, rate=0.5)
    # The phrase of the Python that serves it: "Content Too Large" from 3.13 on.
    too_large = http.HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    assert (raised.value.status, raised.value.message) == (413, too_large.phrase)


async def test_company_with_its_own_lines(api: Any, sb: Sandbox) -> None:
    company = await sb.add_company(name="Lines", lines=["15550009999"])
    assert company["lines"] == ["15550009999"]
    assert company["api_key"] != sb.api_key


async def test_python_dash_m_prints_urls_and_serves() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "campaignkit.sandbox",
        "--port",
        "0",
        "--speed",
        "5",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        printed: dict[str, str] = {}
        while "api_key" not in printed:
            line = (await asyncio.wait_for(process.stdout.readline(), 10)).decode()
            assert line, "the sandbox exited early"
            name, _, value = line.partition(":")
            printed[name.strip()] = value.strip()
        assert printed["base_url"].endswith("/main")
        assert printed["campaign_url"].endswith("/campaign")
        assert printed["agent_url"].endswith("/agent")
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                printed["base_url"] + "/poll/api/all",
                headers={"Authorization": printed["api_key"]},
            ) as response,
        ):
            assert response.status == 200
    finally:
        process.terminate()
        await process.wait()
