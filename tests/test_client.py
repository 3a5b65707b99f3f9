"""CampaignClient over a scripted exchange: every call, retries, sends; and the
default aiohttp exchange's lifecycle against a local server."""

from __future__ import annotations

import asyncio
import gc
import re
import warnings
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from helpers.exchange import (
    Reply,
    ScriptedExchange,
    dropped_after_sending,
    sent_before_any_byte,
    timed_out_after_sending,
)
from helpers.servers import serving
from yarl import URL

from campaignkit import (
    Agent,
    AmbiguousSendError,
    CampaignAck,
    CampaignClient,
    CampaignKitError,
    CampaignState,
    ClientConfig,
    ConfigurationError,
    ConnectionError,
    DeploymentStatus,
    HistoryEntry,
    LegacyDeployment,
    Poll,
    RateLimitError,
    RedirectError,
    ResponseError,
    RetiredEndpointError,
    RetryPolicy,
    ServerError,
    SessionKey,
    SessionQueryNames,
    SessionUpdate,
    TimeoutError,
    User,
    ValidationError,
    deployment_squad,
)
from campaignkit._wire.sansio import Request
from campaignkit.testing import FakeTime

KEY = "sk_tst_client_abcdef"
BASE = "https://main.example.com/api"
CAMPAIGN = "https://campaigns.example.com"
AGENTS = "https://agents.example.com"

ACK = {
    "message": "queued",
    "id": "12",
    "batch_id": "b-1",
    "launch_request_id": "lr-1",
    "status_url": "/v2/send-campaign/lr-1",
}
STATUS = {
    "launch_request_id": "lr-1",
    "status": "CLAIMED",
    "poll_id": 12,
    "deployments": [
        {
            "conversation_id": "c1",
            "service_id": "s1",
            "cellphone": "3001234567",
            "business_scope_id": None,
            "username": None,
            "status": None,
        },
        {
            "conversation_id": "c2",
            "service_id": "s2",
            "cellphone": "3001234568",
            "business_scope_id": "bs",
            "username": "ana",
            "status": "PUSH_NOTIFATION",
        },
    ],
}
SESSION = {
    "id": "s1",
    "created_at": "2024-03-01 10:20:30.123456",
    "finished_at": "2024-03-01 11:00:00.000000",
    "user": {"country_code": "+57", "cellphone": "3001234567"},
}
HISTORY = [
    {
        "type": "MESSAGE",
        "message": {
            "type": "TEXT",
            "sender": "AI",
            "text": "hola",
            "file_url": None,
            "created_at": 1700000000,
            "delivered_at": 1700000005,
            "read_at": None,
            "extra": {"k": [1]},
        },
    }
]
AGENT_LIST = [
    {
        "id": 3,
        "first_name": "Ana",
        "last_name": "Ruiz",
        "email": "ana@x.co",
        "tags": [{"id": 1, "name": "sales"}],
    }
]
LEGACY = {
    "message": "ok",
    "id": "12",
    "batch_id": "b",
    "conversations_id": ["c1"],
    "new_last_scheduleded_deployment": "2026-01-02T03:04:05Z",
}

USERS = [
    User(
        cellphone="300 123-4567",
        country_code="+57",
        user_session_keys={"name": "Ana"},
        deployment_eta=datetime(2030, 1, 1, tzinfo=UTC),
    ),
    User(
        cellphone="(555) 201-0100",
        country_code="+1",
        user_session_keys=[SessionKey("x", "y"), deployment_squad("5730012345")],
    ),
]
USERS_BODY = (
    b'{"users":[{"cellphone":"3001234567","country_code":"+57",'
    b'"user_session_keys":[{"key":"name","value":"Ana"}],"deployment_eta":1893456000},'
    b'{"cellphone":"5552010100","country_code":"+1","user_session_keys":'
    b'[{"key":"x","value":"y"},{"key":"deployment_squad","value":"DS_5730012345"}]}]}'
)


@pytest.fixture
def sleeps() -> FakeTime:
    """The clients' time: every wait is recorded and passes at once."""
    return FakeTime()


@pytest.fixture
def mocked() -> ScriptedExchange:
    return ScriptedExchange()


@pytest.fixture
async def client(sleeps: FakeTime, mocked: ScriptedExchange) -> AsyncIterator[CampaignClient]:
    async with sleeps.install(
        CampaignClient(KEY, base_url=BASE, campaign_url=CAMPAIGN, agent_url=AGENTS, exchange=mocked)
    ) as c:
        yield c


def sent(m: ScriptedExchange) -> list[tuple[str, str, Request]]:
    return [(r.endpoint.method, r.url, r) for r in m.requests]


def count(m: ScriptedExchange) -> int:
    return len(m.requests)


def assert_headers(request: Request, *, json_body: bool) -> None:
    # That redirects are never followed is the adapter's (test_aiohttp_exchange).
    headers = request.headers
    assert headers["Authorization"] == KEY
    assert headers["User-Agent"].startswith("campaignkit/")
    assert ("Content-Type" in headers) is json_body
    if json_body:
        assert headers["Content-Type"] == "application/json"


# -- the eight calls ------------------------------------------------------------


async def test_send_campaign(client: CampaignClient, mocked: ScriptedExchange) -> None:
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", status=202, payload=ACK)
    ack = await client.send_campaign(12, iter(USERS))
    assert ack == CampaignAck("queued", "12", "b-1", "lr-1", "/v2/send-campaign/lr-1")
    [(method, url, request)] = sent(mocked)
    assert (method, url) == ("POST", f"{CAMPAIGN}/v2/send-campaign/12")
    assert request.body == USERS_BODY
    assert_headers(request, json_body=True)


async def test_get_campaign_status(client: CampaignClient, mocked: ScriptedExchange) -> None:
    mocked.get(f"{CAMPAIGN}/v2/send-campaign/lr-1", payload=STATUS)
    status = await client.get_campaign_status("lr-1")
    assert status.status is CampaignState.CLAIMED
    assert status.poll_id == 12
    assert [d.status for d in status.deployments] == [None, DeploymentStatus.PUSH_NOTIFICATION]
    assert status.deployments[1].username == "ana"
    [(method, url, request)] = sent(mocked)
    assert (method, url) == ("GET", f"{CAMPAIGN}/v2/send-campaign/lr-1")
    assert request.body is None
    assert_headers(request, json_body=False)


async def test_update_session(client: CampaignClient, mocked: ScriptedExchange) -> None:
    mocked.post(f"{BASE}/session/ext%2F1/update", payload={"message": "ok", "session_id": "s9"})
    result = await client.update_session("ext/1", {"plan": "gold", "n": "2"})
    assert result == SessionUpdate("ok", "s9")
    [(method, url, request)] = sent(mocked)
    assert (method, url) == ("POST", f"{BASE}/session/ext%2F1/update")
    assert request.body == (
        b'{"user_session_keys":[{"key":"plan","value":"gold"},{"key":"n","value":"2"}]}'
    )
    assert_headers(request, json_body=True)


async def test_a_session_keys_type_is_sent_only_when_set(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    mocked.post(f"{BASE}/session/e1/update", payload={"message": "ok", "session_id": "s9"})
    where = '{"latitude": 4.59, "longitude": -72.03}'
    await client.update_session("e1", [SessionKey("loc", where, "location"), SessionKey("a", "b")])
    [(_, _, request)] = sent(mocked)
    assert request.body is not None
    assert orjson.loads(request.body) == {
        "user_session_keys": [
            {"key": "loc", "value": where, "type": "location"},
            {"key": "a", "value": "b"},
        ]
    }
    with pytest.raises(ValidationError) as caught:
        await client.update_session("e1", [SessionKey("a", "b", "")])
    assert caught.value.problems[0][0] == "user_session_keys[0].type"


async def test_update_session_without_the_key_when_so_configured(mocked: ScriptedExchange) -> None:
    mocked.post(f"{BASE}/session/e1/update", payload={"message": "ok", "session_id": "s9"})
    mocked.get(f"{BASE}/poll/api/all", payload=[])
    async with CampaignClient(
        KEY, base_url=BASE, authorize_session_update=False, exchange=mocked
    ) as client:
        await client.update_session("e1", {"a": "b"})
        await client.list_polls()
    [(_, _, update), (_, _, polls)] = sent(mocked)
    assert "Authorization" not in update.headers
    assert polls.headers["Authorization"] == KEY


async def test_list_sessions_with_every_query(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    url = f"{BASE}/devapi/poll/12/sessions?since=1700000000&until=1700003600&limit=50&after=cur"
    mocked.get(url, payload={"results": [SESSION], "next_id": "n2"})
    page = await client.list_sessions(
        12, start=datetime.fromtimestamp(1700000000, UTC), end=1700003600, limit=50, cursor="cur"
    )
    assert page.next_id == "n2"
    assert page.results[0].created_at == datetime(2024, 3, 1, 10, 20, 30, 123456, tzinfo=UTC)
    assert page.results[0].user.cellphone == "3001234567"
    [(method, sent_url, request)] = sent(mocked)
    assert method == "GET"
    assert URL(sent_url).query == {
        "since": "1700000000",
        "until": "1700003600",
        "limit": "50",
        "after": "cur",
    }
    assert_headers(request, json_body=False)


async def test_session_query_names_are_overridable_in_one_place(
    mocked: ScriptedExchange,
) -> None:
    names = SessionQueryNames(start="start", end="end", limit="page_size", cursor="next_id")
    url = f"{BASE}/devapi/poll/12/sessions"
    mocked.get(f"{url}?start=1&end=2&page_size=1", payload=page(["a"], "c1"))
    mocked.get(f"{url}?start=1&end=2&page_size=1&next_id=c1", payload=page(["b"], None))
    async with CampaignClient(KEY, base_url=BASE, session_query=names, exchange=mocked) as client:
        ids = [s.id async for s in client.iter_sessions(12, start=1, end=2, page_size=1)]
    assert ids == ["a", "b"]
    assert count(mocked) == 2


async def test_list_sessions_without_query(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    mocked.get(f"{BASE}/devapi/poll/12/sessions", payload={"results": []})
    page = await client.list_sessions("12")
    assert page.results == ()
    assert page.next_id is None
    [(_, url, _)] = sent(mocked)
    assert url == f"{BASE}/devapi/poll/12/sessions"


async def test_list_agents(client: CampaignClient, mocked: ScriptedExchange) -> None:
    mocked.get(f"{AGENTS}/agent/company/agents", payload=AGENT_LIST)
    agents = await client.list_agents()
    assert isinstance(agents[0], Agent)
    assert agents[0].tags[0].name == "sales"
    [(method, url, request)] = sent(mocked)
    assert (method, url) == ("GET", f"{AGENTS}/agent/company/agents")
    assert_headers(request, json_body=False)


async def test_deploy_legacy(client: CampaignClient, mocked: ScriptedExchange) -> None:
    mocked.post(f"{BASE}/deployment/api/poll/12", payload=LEGACY)
    with pytest.warns(DeprecationWarning, match="15 November 2026"):
        result = await client.deploy_legacy(12, USERS)
    assert isinstance(result, LegacyDeployment)
    assert result.new_last_scheduleded_deployment == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    [(method, url, request)] = sent(mocked)
    assert (method, url) == ("POST", f"{BASE}/deployment/api/poll/12")
    assert request.body == USERS_BODY
    assert_headers(request, json_body=True)


@pytest.mark.parametrize("status", [404, 410])
async def test_deploy_legacy_retired(
    client: CampaignClient, mocked: ScriptedExchange, status: int
) -> None:
    mocked.post(
        f"{BASE}/deployment/api/poll/12",
        status=status,
        payload={"error": "not_found", "message": "gone"},
    )
    with (
        pytest.warns(DeprecationWarning, match="send_campaign"),
        pytest.raises(RetiredEndpointError) as caught,
    ):
        await client.deploy_legacy(12, USERS)
    assert "use send_campaign" in str(caught.value)
    assert count(mocked) == 1


async def test_get_session_history(client: CampaignClient, mocked: ScriptedExchange) -> None:
    mocked.get(f"{BASE}/devapi/session/s%201/history", payload=HISTORY)
    [entry] = await client.get_session_history("s 1")
    assert isinstance(entry, HistoryEntry)
    assert entry.message.created_at == datetime.fromtimestamp(1700000000, UTC)
    assert entry.message.read_at is None
    assert entry.message.extra == {"k": [1]}
    [(method, url, request)] = sent(mocked)
    assert (method, url) == ("GET", f"{BASE}/devapi/session/s%201/history")
    assert_headers(request, json_body=False)


async def test_list_polls(client: CampaignClient, mocked: ScriptedExchange) -> None:
    mocked.get(f"{BASE}/poll/api/all", payload=[{"id": 1, "name": "NPS"}, {"id": 2, "name": "B"}])
    assert await client.list_polls() == [Poll(1, "NPS"), Poll(2, "B")]
    [(method, url, request)] = sent(mocked)
    assert (method, url) == ("GET", f"{BASE}/poll/api/all")
    assert_headers(request, json_body=False)


async def test_path_traversal_stays_in_the_segment(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    mocked.get(re.compile(".*"), payload=STATUS)
    await client.get_campaign_status("../../admin?x=1#f")
    [(_, url, _)] = sent(mocked)
    assert url == f"{CAMPAIGN}/v2/send-campaign/..%2F..%2Fadmin%3Fx%3D1%23f"
    # (that the adapter sends it as built is test_aiohttp_exchange's)
    assert URL(url, encoded=True).parts == ("/", "v2", "send-campaign", "../../admin?x=1#f")
    assert URL(url, encoded=True).raw_path.startswith("/v2/send-campaign/..%2F..%2Fadmin%3Fx")
    assert URL(url, encoded=True).raw_query_string == ""
    assert URL(url, encoded=True).host == "campaigns.example.com"


# -- iter_sessions ----------------------------------------------------------------


def page(ids: list[str], next_id: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"results": [{**SESSION, "id": i} for i in ids]}
    if next_id is not None:
        body["next_id"] = next_id
    return body


@pytest.mark.parametrize("last", ["", None])
async def test_iter_sessions_follows_cursors(
    client: CampaignClient, mocked: ScriptedExchange, last: str | None
) -> None:
    url = f"{BASE}/devapi/poll/7/sessions"
    mocked.get(f"{url}?limit=2", payload=page(["a", "b"], "c1"))
    mocked.get(f"{url}?limit=2&after=c1", payload=page(["c", "d"], "c2"))
    mocked.get(f"{url}?limit=2&after=c2", payload=page(["e"], last))
    ids = [s.id async for s in client.iter_sessions(7, page_size=2)]
    assert ids == ["a", "b", "c", "d", "e"]
    assert count(mocked) == 3


async def test_iter_sessions_repeated_cursor(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    url = f"{BASE}/devapi/poll/7/sessions"
    mocked.get(url, payload=page(["a"], "c1"))
    mocked.get(f"{url}?after=c1", payload=page(["b"], "c2"))
    mocked.get(f"{url}?after=c2", payload=page(["c"], "c1"))
    ids: list[str] = []

    async def collect() -> None:
        async for session in client.iter_sessions(7):
            ids.append(session.id)

    with pytest.raises(ResponseError, match="repeated cursor"):
        await collect()
    assert ids == ["a", "b", "c"]
    assert count(mocked) == 3


async def test_iter_sessions_validates_before_any_request(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    with pytest.raises(ValidationError) as caught:
        async for _ in client.iter_sessions(7, page_size=0, start=5, end=1):
            pass
    assert {p for p, _ in caught.value.problems} == {"page_size", "end"}
    assert count(mocked) == 0


# -- retries ----------------------------------------------------------------------


async def test_429_retry_after_is_honoured(
    client: CampaignClient, mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    mocked.get(f"{BASE}/poll/api/all", status=429, headers={"Retry-After": "7"}, body=b"{}")
    mocked.get(f"{BASE}/poll/api/all", payload=[])
    assert await client.list_polls() == []
    assert sleeps.sleeps == [7.0]
    assert count(mocked) == 2


async def test_retry_after_is_capped(mocked: ScriptedExchange, sleeps: FakeTime) -> None:
    async with sleeps.install(
        CampaignClient(KEY, base_url=BASE, retry=RetryPolicy(retry_after_cap=3.0), exchange=mocked)
    ) as client:
        mocked.get(f"{BASE}/poll/api/all", status=503, headers={"Retry-After": "3600"})
        mocked.get(f"{BASE}/poll/api/all", payload=[])
        await client.list_polls()
    assert sleeps.sleeps == [3.0]


READS: list[tuple[str, str, tuple[Any, ...], Any]] = [
    ("get_campaign_status", f"{CAMPAIGN}/v2/send-campaign/lr-1", ("lr-1",), STATUS),
    ("list_sessions", f"{BASE}/devapi/poll/1/sessions", (1,), {"results": []}),
    ("list_agents", f"{AGENTS}/agent/company/agents", (), AGENT_LIST),
    ("get_session_history", f"{BASE}/devapi/session/s1/history", ("s1",), HISTORY),
    ("list_polls", f"{BASE}/poll/api/all", (), []),
]


@pytest.mark.parametrize(("name", "url", "args", "payload"), READS)
async def test_reads_retry_503_then_succeed(
    client: CampaignClient,
    mocked: ScriptedExchange,
    sleeps: FakeTime,
    name: str,
    url: str,
    args: tuple[Any, ...],
    payload: Any,
) -> None:
    mocked.get(url, status=503, body=b"<html>busy</html>")
    mocked.get(url, payload=payload)
    await getattr(client, name)(*args)
    assert count(mocked) == 2
    [delay] = sleeps.sleeps
    assert 0 <= delay <= 0.5  # full jitter of the first backoff step


async def test_reads_retry_dropped_connections_and_give_up(
    client: CampaignClient, mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    mocked.get(f"{BASE}/poll/api/all", exception=dropped_after_sending(), repeat=True)
    with pytest.raises(ConnectionError) as caught:
        await client.list_polls()
    assert isinstance(caught.value, OSError)  # the builtin ConnectionError too
    assert count(mocked) == 3  # first attempt + 2 retries by default
    assert len(sleeps.sleeps) == 2
    assert 0 <= sleeps.sleeps[1] <= 1.0


@pytest.mark.parametrize("status", [500, 502, 504])
async def test_send_campaign_5xx_is_ambiguous(
    client: CampaignClient, mocked: ScriptedExchange, status: int
) -> None:
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", status=status, repeat=True)
    with pytest.raises(AmbiguousSendError) as caught:
        await client.send_campaign(12, USERS)
    assert count(mocked) == 1
    assert caught.value.users == tuple(USERS)
    assert isinstance(caught.value.cause, ServerError)


@pytest.mark.parametrize(
    "exception",
    [
        # What the adapter makes of a server disconnect, a read timeout and an
        # answer cut mid-body (test_aiohttp_exchange checks that mapping).
        dropped_after_sending(),
        timed_out_after_sending(),
        dropped_after_sending("ClientPayloadError: cut"),
    ],
    ids=["disconnected", "timeout", "cut"],
)
async def test_send_campaign_dropped_is_ambiguous(
    client: CampaignClient, mocked: ScriptedExchange, exception: BaseException
) -> None:
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", exception=exception, repeat=True)
    with pytest.raises(AmbiguousSendError) as caught:
        await client.send_campaign(12, USERS)
    assert count(mocked) == 1
    assert caught.value.users == tuple(USERS)


async def test_send_campaign_unreadable_2xx_is_ambiguous(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", status=202, body=b"<html>")
    with pytest.raises(AmbiguousSendError):
        await client.send_campaign(12, USERS)
    assert count(mocked) == 1


async def test_update_session_500_is_ambiguous(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    mocked.post(f"{BASE}/session/e1/update", status=500, repeat=True)
    with pytest.raises(AmbiguousSendError) as caught:
        await client.update_session("e1", {"a": "b"})
    assert caught.value.users == ()
    assert count(mocked) == 1


async def test_send_campaign_connect_failure_is_retried(
    client: CampaignClient, mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", exception=sent_before_any_byte())
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", status=202, payload=ACK)
    assert (await client.send_campaign(12, USERS)).launch_request_id == "lr-1"
    assert count(mocked) == 2
    assert len(sleeps.sleeps) == 1


async def test_send_campaign_connect_failures_exhausted(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", exception=sent_before_any_byte(), repeat=True)
    with pytest.raises(ConnectionError) as caught:
        await client.send_campaign(12, USERS)
    assert caught.value.request_sent is False
    assert count(mocked) == 3


async def test_send_campaign_429_is_retried(
    client: CampaignClient, mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    mocked.post(
        f"{CAMPAIGN}/v2/send-campaign/12",
        status=429,
        headers={"Retry-After": "2"},
        payload={"detail": "slow down"},
    )
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", status=202, payload=ACK)
    await client.send_campaign(12, USERS)
    assert count(mocked) == 2
    assert sleeps.sleeps == [2.0]


async def test_send_campaign_429_exhausted_is_a_rate_limit(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    mocked.post(
        f"{CAMPAIGN}/v2/send-campaign/12", status=429, headers={"Retry-After": "1"}, repeat=True
    )
    with pytest.raises(RateLimitError) as caught:
        await client.send_campaign(12, USERS, max_retries=1)
    assert caught.value.retry_after == 1.0
    assert count(mocked) == 2


async def test_per_call_max_retries_and_timeout(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    mocked.get(f"{BASE}/poll/api/all", status=503, repeat=True)
    with pytest.raises(ServerError):
        await client.list_polls(max_retries=0, timeout=3.5)
    assert count(mocked) == 1
    assert mocked.timeouts == [3.5]


async def test_per_call_max_retries_more(
    client: CampaignClient, mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    for _ in range(4):
        mocked.get(f"{BASE}/poll/api/all", status=502)
    mocked.get(f"{BASE}/poll/api/all", payload=[])
    assert await client.list_polls(max_retries=4) == []
    assert count(mocked) == 5
    assert len(sleeps.sleeps) == 4


async def test_default_timeout_is_the_configured_one(mocked: ScriptedExchange) -> None:
    async with CampaignClient(KEY, base_url=BASE, timeout=4.0, exchange=mocked) as client:
        mocked.get(f"{BASE}/poll/api/all", payload=[])
        await client.list_polls()
    # (the connect timeout the adapter derives is test_aiohttp_exchange's)
    assert mocked.timeouts == [4.0]


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), "5"])
async def test_bad_per_call_timeout(
    client: CampaignClient, mocked: ScriptedExchange, timeout: float
) -> None:
    with pytest.raises(ValidationError):
        await client.list_polls(timeout=timeout)
    assert count(mocked) == 0


async def test_deadline_stops_a_wait_that_would_pass_it(
    mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    async with sleeps.install(
        CampaignClient(
            KEY, base_url=BASE, retry=RetryPolicy(deadline=5.0, max_retries=5), exchange=mocked
        )
    ) as client:
        mocked.get(f"{BASE}/poll/api/all", status=429, headers={"Retry-After": "10"}, repeat=True)
        with pytest.raises(RateLimitError):
            await client.list_polls()
    assert count(mocked) == 1
    assert sleeps.sleeps == []


async def test_a_deadline_passed_during_a_wait_ends_the_call_unsent(
    mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    async with sleeps.install(
        CampaignClient(KEY, base_url=BASE, retry=RetryPolicy(deadline=5.0), exchange=mocked)
    ) as client:

        async def overslept(seconds: float) -> None:  # the loop was busy elsewhere
            await sleeps.sleep(seconds + 10.0)

        client.transport.sleep = overslept
        mocked.get(f"{BASE}/poll/api/all", status=503, body=b"{}", repeat=True)
        with pytest.raises(TimeoutError, match="deadline passed") as caught:
            await client.list_polls()
    assert caught.value.request_sent is False
    assert count(mocked) == 1
    assert len(sleeps.sleeps) == 1


async def test_a_call_answered_at_once_never_enters_the_retry_loop(
    client: CampaignClient, mocked: ScriptedExchange, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_retries(*args: object) -> object:
        raise AssertionError("the retry loop was entered")

    monkeypatch.setattr(client.transport, "_retried", no_retries)
    mocked.get(f"{BASE}/poll/api/all", payload=[])
    assert await client.list_polls() == []


async def test_deadline_bounds_the_request_timeout(mocked: ScriptedExchange) -> None:
    async with CampaignClient(
        KEY, base_url=BASE, timeout=30.0, retry=RetryPolicy(deadline=2.0), exchange=mocked
    ) as client:
        mocked.get(f"{BASE}/poll/api/all", payload=[])
        await client.list_polls()
    [timeout] = mocked.timeouts
    assert 0 < timeout <= 2.0


async def test_redirect_is_not_followed(client: CampaignClient, mocked: ScriptedExchange) -> None:
    mocked.get(f"{BASE}/poll/api/all", status=302, headers={"Location": "https://evil.example/"})
    mocked.get("https://evil.example/", payload=[])
    with pytest.raises(RedirectError) as caught:
        await client.list_polls()
    assert caught.value.status == 302
    assert [url for _, url, _ in sent(mocked)] == [f"{BASE}/poll/api/all"]


def over_the_cap() -> ResponseError:
    """What the adapter raises for an answer over max_response_bytes."""
    return ResponseError("answer exceeds max_response_bytes=64", status=200)


async def test_an_answer_over_the_cap_is_not_retried(
    client: CampaignClient, mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    mocked.get(f"{BASE}/poll/api/all", exception=over_the_cap(), repeat=True)
    with pytest.raises(ResponseError, match="max_response_bytes"):
        await client.list_polls()
    assert count(mocked) == 1
    assert sleeps.sleeps == []


async def test_a_send_answered_over_the_cap_is_ambiguous(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", exception=over_the_cap(), repeat=True)
    with pytest.raises(AmbiguousSendError) as caught:
        await client.send_campaign(12, USERS)
    assert count(mocked) == 1
    assert isinstance(caught.value.cause, ResponseError)
    assert caught.value.users == tuple(USERS)


# -- validation --------------------------------------------------------------------


async def test_validation_lists_every_problem_and_sends_nothing(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    users = [
        USERS[0],
        User(cellphone="300-ABC", country_code="57", deployment_eta=datetime(2030, 1, 1)),
        User(
            cellphone=3001,  # type: ignore[arg-type]
            country_code="+12345",
            user_session_keys=[SessionKey("k", 5), "nope"],  # type: ignore[arg-type, list-item]
        ),
        "not a user",
    ]
    with pytest.raises(ValidationError) as caught:
        await client.send_campaign("", users)  # type: ignore[arg-type]
    paths = [path for path, _ in caught.value.problems]
    assert sorted(paths) == sorted(
        [
            "poll_id",
            "users[1].country_code",
            "users[1].cellphone",
            "users[1].deployment_eta",
            "users[2].country_code",
            "users[2].cellphone",
            "users[2].user_session_keys[0].value",
            "users[2].user_session_keys[1]",
            "users[3]",
        ]
    )
    assert "users[1].country_code" in str(caught.value)
    assert count(mocked) == 0


@pytest.mark.parametrize("users", [[], iter([]), "3001234567", {"a": 1}, None, 5])
async def test_users_must_be_a_nonempty_iterable(
    client: CampaignClient, mocked: ScriptedExchange, users: Any
) -> None:
    with pytest.raises(ValidationError) as caught:
        await client.send_campaign(1, users)
    assert [path for path, _ in caught.value.problems] == ["users"]
    with pytest.raises(ValidationError) as caught:
        await client.send_campaign("", users)  # reported beside another problem too
    assert [path for path, _ in caught.value.problems] == ["poll_id", "users"]
    assert count(mocked) == 0


@pytest.mark.parametrize(
    ("kwargs", "paths"),
    [
        ({"start": datetime(2024, 1, 1)}, ["start"]),
        ({"start": 10, "end": 5}, ["end"]),
        ({"limit": 10001}, ["limit"]),
        ({"limit": 0, "cursor": ""}, ["limit", "cursor"]),
        ({"limit": True}, ["limit"]),
        ({"start": -1, "end": datetime(2024, 1, 1)}, ["start", "end"]),
    ],
)
async def test_list_sessions_validation(
    client: CampaignClient, mocked: ScriptedExchange, kwargs: dict[str, Any], paths: list[str]
) -> None:
    with pytest.raises(ValidationError) as caught:
        await client.list_sessions(1, **kwargs)
    assert [path for path, _ in caught.value.problems] == paths
    assert count(mocked) == 0


async def test_end_before_start_reported_with_other_problems(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    with pytest.raises(ValidationError) as caught:
        await client.list_sessions("..", start=10, end=5, limit=0)
    assert [path for path, _ in caught.value.problems] == ["poll_id", "end", "limit"]


# -- cancellation and lifecycle ----------------------------------------------------


async def test_cancelled_error_propagates_and_is_not_retried(
    client: CampaignClient, mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    mocked.get(f"{BASE}/poll/api/all", exception=asyncio.CancelledError(), repeat=True)
    with pytest.raises(asyncio.CancelledError):
        await client.list_polls()
    assert count(mocked) == 1
    assert sleeps.sleeps == []


async def test_cancelling_a_send_is_not_retried(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    started = asyncio.Event()

    async def hang(request: Request) -> Reply:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", callback=hang, repeat=True)
    task = asyncio.create_task(client.send_campaign(12, USERS))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert count(mocked) == 1


async def test_cancelling_a_retry_under_way_is_not_retried(
    client: CampaignClient, mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    started = asyncio.Event()

    async def hang(request: Request) -> Reply:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    url = f"{BASE}/poll/api/all"
    mocked.get(url, status=503, body=b"{}")
    mocked.get(url, callback=hang, repeat=True)
    task = asyncio.create_task(client.list_polls())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert count(mocked) == 2
    assert len(sleeps.sleeps) == 1


def test_construction_needs_no_event_loop() -> None:
    client = CampaignClient(KEY, base_url=BASE)
    assert "CampaignClient" in repr(client)


async def test_aclose_closes_the_given_exchange(mocked: ScriptedExchange) -> None:
    async with CampaignClient(KEY, base_url=BASE, exchange=mocked) as client:
        assert not mocked.closed
        with pytest.raises(ConfigurationError, match="exchange="):
            client.session  # noqa: B018 - there is no aiohttp session to give
    assert mocked.closed


def test_a_session_and_an_exchange_together_are_refused(mocked: ScriptedExchange) -> None:
    session = object()
    with pytest.raises(ConfigurationError, match="session= or exchange="):
        CampaignClient(KEY, base_url=BASE, session=session, exchange=mocked)  # type: ignore[arg-type]


# -- the default exchange (aiohttp) against a local server ---------------------


class Polls:
    """A local service of one call, ``list_polls``, counting its requests."""

    def __init__(self, payload: Any = ()) -> None:
        self.payload = list(payload)
        self.requests = 0
        self.app = web.Application()
        self.app.router.add_get("/poll/api/all", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        return web.json_response(self.payload)


async def test_session_is_lazy_pooled_and_closed_once() -> None:
    client = CampaignClient(KEY, base_url=BASE)
    session = client.session
    assert session is client.session
    assert not session.closed
    await client.aclose()
    await client.aclose()
    assert session.closed


async def test_injected_session_is_never_closed() -> None:
    service = Polls()
    async with serving(service.app) as base, aiohttp.ClientSession() as session:
        async with CampaignClient(KEY, base_url=base, session=session) as client:
            assert await client.list_polls() == []
            assert client.session is session
        assert not session.closed
        assert service.requests == 1


async def test_no_unclosed_session_warning() -> None:
    service = Polls([{"id": 1, "name": "NPS"}])
    async with serving(service.app) as base:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            async with CampaignClient(KEY, base_url=base) as client:
                assert await client.list_polls() == [Poll(1, "NPS")]
            del client
            gc.collect()
    assert service.requests == 1
    assert not [w for w in caught if "Unclosed" in str(w.message)]


async def test_closed_client_refuses_calls() -> None:
    service = Polls()
    async with serving(service.app) as base:
        client = CampaignClient(KEY, base_url=base)
        await client.aclose()
        with pytest.raises(CampaignKitError, match="closed"):
            await client.list_polls()
    assert service.requests == 0


async def test_response_size_cap() -> None:
    service = Polls([{"id": i, "name": "x" * 10} for i in range(9)])
    async with (
        serving(service.app) as base,
        CampaignClient(KEY, base_url=base, max_response_bytes=64) as client,
    ):
        with pytest.raises(ResponseError, match="max_response_bytes"):
            await client.list_polls()
    assert service.requests == 1


# -- configuration ---------------------------------------------------------------------


def test_configuration_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMPAIGNKIT_API_KEY", "env-key")
    monkeypatch.setenv("CAMPAIGNKIT_BASE_URL", "https://env-main.example/")
    monkeypatch.setenv("CAMPAIGNKIT_CAMPAIGN_URL", "https://env-campaign.example")
    monkeypatch.setenv("CAMPAIGNKIT_AGENT_URL", "https://env-agents.example/x")
    config = CampaignClient().config
    assert config.api_key == "env-key"
    assert config.base_url == "https://env-main.example"
    assert config.campaign_url == "https://env-campaign.example"
    assert config.agent_url == "https://env-agents.example/x"
    assert CampaignClient("arg-key", base_url="https://arg.example").config.base_url == (
        "https://arg.example"
    )


@pytest.mark.parametrize("key", [None, "", "   "])
def test_missing_key_fails_at_construction(monkeypatch: pytest.MonkeyPatch, key: Any) -> None:
    monkeypatch.delenv("CAMPAIGNKIT_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="CAMPAIGNKIT_API_KEY"):
        CampaignClient(key)


@pytest.mark.parametrize("key", ["abc\r\nX-Evil: 1", "a\nb", "tab\there", "nul\x00"])
def test_key_that_cannot_be_a_header_fails_at_construction(key: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        CampaignClient(key, base_url=BASE)
    assert key not in str(caught.value)


@pytest.mark.parametrize("url", ["ftp://x.example", "main.example.com", "https://x.example?a=1"])
def test_bad_urls_fail_at_construction(url: str) -> None:
    with pytest.raises(ConfigurationError):
        CampaignClient(KEY, base_url=url)


@pytest.mark.parametrize(
    "options",
    [
        {"max_retries": -1},
        {"max_retries": "3"},
        {"max_retries": True},
        {"timeout": "5"},
        {"timeout": float("nan")},
        {"connect_timeout": 0},
        {"max_connections": 0},
        {"max_connections": 2.5},
    ],
    ids=str,
)
def test_bad_client_options_fail_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        CampaignClient(KEY, base_url=BASE, **options)


@pytest.mark.parametrize(
    "policy",
    [
        {"max_retries": "2"},
        {"backoff_initial": 0},
        {"backoff_max": -1.0},
        {"retry_after_cap": None},
        {"deadline": 0},
        {"deadline": "60"},
    ],
    ids=str,
)
def test_bad_retry_policy_fails_at_construction(policy: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        RetryPolicy(**policy)


async def test_missing_host_fails_before_any_request(
    monkeypatch: pytest.MonkeyPatch, mocked: ScriptedExchange
) -> None:
    monkeypatch.delenv("CAMPAIGNKIT_AGENT_URL", raising=False)
    async with CampaignClient(KEY, base_url=BASE, exchange=mocked) as client:
        with pytest.raises(ConfigurationError, match="CAMPAIGNKIT_AGENT_URL"):
            await client.list_agents()
    assert count(mocked) == 0


async def test_a_config_and_settings_together_are_refused() -> None:
    config = ClientConfig(KEY, base_url=BASE)
    conflicts: list[dict[str, Any]] = [
        {"timeout": 5.0},
        {"max_retries": 1},
        {"api_key": KEY},
        {"auth_scheme": "Bearer"},
    ]
    for settings in conflicts:
        with pytest.raises(ConfigurationError, match="either config= or settings"):
            CampaignClient(config=config, **settings)
    assert CampaignClient(config=config).config is config


async def test_max_retries_joins_a_given_retry_policy() -> None:
    client = CampaignClient(KEY, max_retries=5, retry=RetryPolicy(backoff_initial=0.1))
    assert client.config.retry == RetryPolicy(max_retries=5, backoff_initial=0.1)
    with pytest.raises(ConfigurationError, match="RetryPolicy"):
        CampaignClient(KEY, max_retries=1, retry={"max_retries": 1})  # type: ignore[arg-type]


# -- with_options ----------------------------------------------------------------------

POLLS = f"{BASE}/poll/api/all"


async def test_with_options_are_the_defaults_of_every_call_of_the_copy(
    client: CampaignClient, mocked: ScriptedExchange, sleeps: FakeTime
) -> None:
    patient = client.with_options(timeout=7.5, max_retries=3, extra_headers={"X-Team": "growth"})
    mocked.get(POLLS, status=503, body=b"{}")
    mocked.get(POLLS, status=503, body=b"{}")
    mocked.get(POLLS, status=503, body=b"{}")
    mocked.get(POLLS, payload=[])
    assert await patient.list_polls() == []
    assert mocked.timeouts == [7.5] * 4  # 3 retries: one more than the client's 2
    assert [r.headers["X-Team"] for r in mocked.requests] == ["growth"] * 4
    assert all(r.headers["Authorization"] == KEY for r in mocked.requests)
    assert len(sleeps.sleeps) == 3  # the copy waits on the client's (fake) clock

    # The original is unchanged: its own timeout, retries and headers.
    mocked.requests.clear()
    mocked.timeouts.clear()
    mocked.get(POLLS, status=503, body=b"{}", repeat=True)
    with pytest.raises(ServerError):
        await client.list_polls()
    assert mocked.timeouts == [30.0] * 3
    assert not any("X-Team" in r.headers for r in mocked.requests)
    assert client.config.timeout == 30.0
    assert client.config.retry.max_retries == 2


async def test_a_calls_own_options_come_before_the_copys(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    strict = client.with_options(timeout=7.5, max_retries=3, extra_headers={"X-Team": "growth"})
    mocked.get(POLLS, status=503, body=b"{}", repeat=True)
    with pytest.raises(ServerError):
        await strict.list_polls(timeout=2.0, max_retries=0, extra_headers={"x-team": "ops"})
    [request] = mocked.requests
    assert mocked.timeouts == [2.0]
    assert request.headers.getall("X-Team") == ["ops"]  # type: ignore[attr-defined]


async def test_with_options_headers_go_over_the_default_headers(mocked: ScriptedExchange) -> None:
    mocked.get(POLLS, payload=[], repeat=True)
    defaults = {"X-Team": "growth", "X-Source": "cron"}
    async with CampaignClient(
        KEY, base_url=BASE, default_headers=defaults, exchange=mocked
    ) as client:
        tagged = client.with_options(extra_headers={"x-team": "ops", "X-Run": "42"})
        again = tagged.with_options(timeout=3.0)
        await tagged.list_polls()
        await again.list_polls()
        await client.list_polls()
    copy_request, again_request, original_request = mocked.requests
    for request in (copy_request, again_request):
        assert request.headers.getall("X-Team") == ["ops"]  # type: ignore[attr-defined]
        assert (request.headers["X-Source"], request.headers["X-Run"]) == ("cron", "42")
    assert mocked.timeouts == [30.0, 3.0, 30.0]
    assert original_request.headers["X-Team"] == "growth"
    assert "X-Run" not in original_request.headers


async def test_the_copy_tracks_and_sends_with_its_options(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    tagged = client.with_options(timeout=4.0, extra_headers={"X-Team": "growth"})
    mocked.post(f"{CAMPAIGN}/v2/send-campaign/12", status=202, payload=ACK)
    mocked.get(f"{CAMPAIGN}/v2/send-campaign/lr-1", payload={**STATUS, "status": "DONE"})
    ack = await tagged.send_campaign(12, USERS)
    changes = [change async for change in tagged.track(ack)]
    assert [change.current for change in changes] == [DeploymentStatus.PUSH_NOTIFICATION]
    assert [r.headers["X-Team"] for r in mocked.requests] == ["growth", "growth"]
    assert mocked.timeouts == [4.0, 4.0]


async def test_closing_the_copy_leaves_the_pool_to_the_original(
    mocked: ScriptedExchange,
) -> None:
    mocked.get(POLLS, payload=[], repeat=True)
    client = CampaignClient(KEY, base_url=BASE, exchange=mocked)
    async with client.with_options(timeout=5.0) as quick:
        assert quick.transport.exchange is client.transport.exchange
    await quick.aclose()
    assert not mocked.closed
    assert await quick.list_polls() == []
    await client.aclose()
    assert mocked.closed
    with pytest.raises(CampaignKitError, match="closed"):
        await quick.list_polls()


async def test_the_copy_of_a_session_client_shares_the_session() -> None:
    service = Polls()
    async with serving(service.app) as base:
        client = CampaignClient(KEY, base_url=base)
        quick = client.with_options(timeout=5.0, extra_headers={"X-Team": "ops"})
        assert await quick.list_polls() == []
        assert quick.session is client.session
        await quick.aclose()
        assert not client.session.closed
        session = client.session
        await client.aclose()
        assert session.closed
    assert service.requests == 1


@pytest.mark.parametrize(
    ("options", "path", "message"),
    [
        ({"timeout": 0}, "timeout", "positive number of seconds, got 0"),
        ({"timeout": -1.5}, "timeout", "positive number of seconds"),
        ({"timeout": "5"}, "timeout", "positive number of seconds, got '5'"),
        ({"timeout": True}, "timeout", "positive number of seconds"),
        ({"max_retries": -1}, "max_retries", "an int >= 0, got -1"),
        ({"max_retries": 1.5}, "max_retries", "an int >= 0"),
        ({"max_retries": False}, "max_retries", "an int >= 0"),
        (
            {"extra_headers": {"authorization": "other"}},
            "extra_headers['authorization']",
            "API key",
        ),
        ({"extra_headers": {"X-A": "1\r\nX-B: 2"}}, "extra_headers['X-A']", "line breaks"),
        ({"extra_headers": {"X A": "1"}}, "extra_headers['X A']", "header name"),
    ],
)
async def test_bad_options_are_refused_at_once_by_name(
    client: CampaignClient,
    mocked: ScriptedExchange,
    options: dict[str, Any],
    path: str,
    message: str,
) -> None:
    with pytest.raises(ValidationError) as caught:
        client.with_options(**options)
    [(where, problem)] = caught.value.problems
    assert where == path
    assert message in problem
    assert mocked.requests == []


async def test_the_copys_repr_redacts_the_key_and_shows_its_options(
    client: CampaignClient,
) -> None:
    gateway = "gw_live_7hQ2nX9"
    tagged = client.with_options(
        timeout=9.0, max_retries=5, extra_headers={"X-Gateway-Key": gateway, "X-Team": "ops"}
    )
    text = repr(tagged)
    assert KEY not in text
    assert gateway not in text
    assert "timeout=9.0" in text
    assert "max_retries=5" in text
    assert "('X-Team', 'ops')" in text
    assert "('X-Gateway-Key', '***')" in text


def test_a_default_header_that_looks_secret_is_masked_in_the_repr() -> None:
    gateway = "gw_live_9fK2mQ7xZ4pL1sT8"
    client = CampaignClient(
        KEY, base_url=BASE, default_headers={"X-Gateway-Key": gateway, "Cookie": "sid=abc123"}
    )
    assert gateway not in repr(client)
    assert "abc123" not in repr(client.config)
