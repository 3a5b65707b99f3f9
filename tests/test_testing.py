"""campaignkit.testing: the public I/O seam's fake (a table or a handler) and
fake time, driving a real client with no network."""

from __future__ import annotations

import pytest
from aioresponses import aioresponses

from campaignkit import CampaignClient, CampaignKitError, NotFoundError, User
from campaignkit.errors import AmbiguousSendError, ConnectionError
from campaignkit.testing import Answer, Exchange, FakeTime, MockExchange, Request

BASE = "https://main.test/api"
KEY = "sk_tst_testing_1"
POLLS = [{"id": 1, "name": "One"}, {"id": 2, "name": "Two"}]


def client_on(exchange: Exchange) -> CampaignClient:
    return CampaignClient(KEY, base_url=BASE, campaign_url=BASE, exchange=exchange)


async def test_a_table_answers_by_method_and_path_in_order_then_the_last_again() -> None:
    exchange = MockExchange(
        {"GET /poll/api/all": [Answer.json([], status=500), Answer.json(POLLS)]}
    )
    time = FakeTime()
    async with time.install(client_on(exchange)) as client:
        assert [poll.name for poll in await client.list_polls()] == ["One", "Two"]
        assert [poll.id for poll in await client.list_polls()] == [1, 2]
    assert [r.url for r in exchange.requests] == [f"{BASE}/poll/api/all"] * 3
    assert len(time.sleeps) == 1
    assert 0 <= time.sleeps[0] <= 0.5
    assert time.now == 1000.0 + time.sleeps[0]


async def test_a_request_the_table_does_not_name_is_a_404_saying_so() -> None:
    exchange = MockExchange({"GET /poll/api/all": Answer.json(POLLS)})
    async with CampaignClient(KEY, agent_url=BASE, exchange=exchange) as client:
        with pytest.raises(NotFoundError, match="no answer for GET /api/agent/company/agents"):
            await client.list_agents()
    assert len(exchange.requests) == 1


async def test_a_table_exception_is_raised_through_the_retry_rules() -> None:
    exchange = MockExchange(
        {"POST /v2/send-campaign/7": ConnectionError("reset", request_sent=True)}
    )
    async with client_on(exchange) as client:
        with pytest.raises(AmbiguousSendError) as caught:
            await client.send_campaign(7, [User(country_code="+57", cellphone="3001234567")])
    assert len(exchange.requests) == 1  # a send that may have arrived is never resent
    assert caught.value.users[0].cellphone == "3001234567"


async def test_an_async_handler_sees_the_request_as_sent() -> None:
    seen: list[Request] = []

    async def handler(request: Request) -> Answer:
        seen.append(request)
        return Answer.json({"results": [], "next_id": ""})

    async with client_on(MockExchange(handler)) as client:
        page = await client.list_sessions(5, limit=10)
    assert (list(page.results), page.next_id) == ([], None)
    assert seen[0].endpoint.method == "GET"
    assert seen[0].url == f"{BASE}/devapi/poll/5/sessions?limit=10"
    assert seen[0].headers["Authorization"] == KEY


async def test_a_closed_exchange_refuses_and_bad_tables_are_refused() -> None:
    exchange = MockExchange({"GET /poll/api/all": Answer.json(POLLS)})
    client = client_on(exchange)
    await client.aclose()
    with pytest.raises(CampaignKitError, match="closed"):
        await client.list_polls()
    with pytest.raises(ValueError, match="METHOD /path"):
        MockExchange({"poll/api/all": Answer.json([])})
    with pytest.raises(ValueError, match="no answer"):
        MockExchange({"GET /poll/api/all": []})


async def test_aioresponses_cannot_mock_aiohttp_3_14_yet() -> None:
    """The README says aioresponses cannot mock aiohttp 3.14 (its issue #289):
    this fails once it can, so that the README gets updated."""
    with aioresponses() as mocked:
        mocked.get(f"{BASE}/poll/api/all", payload=POLLS)
        async with CampaignClient(KEY, base_url=BASE, max_retries=0) as client:
            with pytest.raises(TypeError, match="stream_writer"):
                await client.list_polls()
