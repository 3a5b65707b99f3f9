"""campaignkit.webhooks: the AgentPicker and the assignment endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from campaignkit import Agent, ServerError, Tag, ValidationError
from campaignkit.sandbox import Sandbox
from campaignkit.webhooks import AgentPicker, NoAgentAvailableError, plain_text

SALES, SUPPORT = Tag(1, "Sales"), Tag(2, "Support")
AGENTS = [
    Agent(30, "Cleo", "C", "cleo@example.com", (SUPPORT,)),
    Agent(10, "Ana", "A", "ana@example.com", (SALES,)),
    Agent(20, "Bo", "B", "bo@example.com", (SALES, SUPPORT)),
]


class FakeClient:
    def __init__(self, agents: list[Agent]) -> None:
        self.agents = list(agents)
        self.calls = 0
        self.fail = False

    async def list_agents(self) -> list[Agent]:
        self.calls += 1
        if self.fail:
            raise ServerError(503, "GET", "http://agents", "", message="down")
        return list(self.agents)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The time the pickers' caches see (only theirs: the loop keeps its own)."""
    fake = Clock()
    monkeypatch.setattr("campaignkit.webhooks._agents.monotonic", fake)
    return fake


async def test_round_robin_in_id_order() -> None:
    picker = AgentPicker(FakeClient(AGENTS))
    assert [(await picker.pick()).id for _ in range(7)] == [10, 20, 30, 10, 20, 30, 10]


async def test_tag_filter_by_name_or_id() -> None:
    by_name = AgentPicker(FakeClient(AGENTS), tag="support")
    assert [(await by_name.pick()).id for _ in range(3)] == [20, 30, 20]
    by_id = AgentPicker(FakeClient(AGENTS), tag=1)
    assert [(await by_id.pick()).id for _ in range(3)] == [10, 20, 10]
    with pytest.raises(NoAgentAvailableError, match="Marketing"):
        await AgentPicker(FakeClient(AGENTS), tag="Marketing").pick()


async def test_ttl_caching(clock: Clock) -> None:
    fake = FakeClient(AGENTS)
    picker = AgentPicker(fake, ttl=60)
    assert [(await picker.pick()).id for _ in range(3)] == [10, 20, 30]
    assert fake.calls == 1
    fake.agents = [a for a in AGENTS if a.id != 20]
    clock.now += 59
    assert (await picker.pick()).id == 10  # still cached
    clock.now += 2
    assert (await picker.pick()).id == 30  # refreshed: 20 is gone
    assert fake.calls == 2
    picker.invalidate()
    await picker.pick()
    assert fake.calls == 3


async def test_concurrent_picks_fetch_once() -> None:
    fake = FakeClient(AGENTS)
    picker = AgentPicker(fake)
    picked = await asyncio.gather(*(picker.pick() for _ in range(9)))
    assert fake.calls == 1
    assert sorted(a.id for a in picked) == [10, 10, 10, 20, 20, 20, 30, 30, 30]


async def test_round_robin_survives_list_changes(clock: Clock) -> None:
    fake = FakeClient(AGENTS)
    picker = AgentPicker(fake, ttl=1)
    assert (await picker.pick()).id == 10
    fake.agents = [*AGENTS, Agent(15, "New", "N", "new@example.com")]
    clock.now += 2
    assert [(await picker.pick()).id for _ in range(4)] == [15, 20, 30, 10]


async def test_least_recent() -> None:
    picker = AgentPicker(FakeClient(AGENTS), strategy="least_recent")
    first = [(await picker.pick()).id for _ in range(3)]
    assert first == [10, 20, 30]
    assert (await picker.pick()).id == 10


async def test_stale_list_used_when_refresh_fails(
    caplog: pytest.LogCaptureFixture, clock: Clock
) -> None:
    fake = FakeClient(AGENTS)
    picker = AgentPicker(fake, ttl=1)
    await picker.pick()
    fake.fail = True
    clock.now += 5
    assert (await picker.pick()).id == 20
    assert "using the cached list" in caplog.text
    with pytest.raises(ServerError):
        await AgentPicker(fake).pick()


def test_option_mistakes_are_validation_errors() -> None:
    with pytest.raises(ValidationError) as raised:
        AgentPicker(FakeClient([]), ttl=-1, strategy="random", answer="name")  # type: ignore[arg-type]
    assert [path for path, _ in raised.value.problems] == ["strategy", "answer", "ttl"]


def test_no_agent_available_is_a_deprecated_alias() -> None:
    with pytest.warns(DeprecationWarning, match="NoAgentAvailableError"):
        from campaignkit.webhooks import NoAgentAvailable
    assert NoAgentAvailable is NoAgentAvailableError


async def test_handler_answers(serve: Any) -> None:
    fake = FakeClient(AGENTS)
    app = web.Application()
    app.router.add_post("/assign", AgentPicker(fake, tag="Sales").handler())
    app.router.add_post("/assign-email", AgentPicker(fake, answer="email").handler())
    app.router.add_get("/assign-text", AgentPicker(fake).handler(render=plain_text))
    app.router.add_post("/nobody", AgentPicker(fake, tag="Nobody").handler())
    broken = FakeClient(AGENTS)
    broken.fail = True
    app.router.add_post("/broken", AgentPicker(broken).handler())
    client = await serve(app)
    assert await (await client.post("/assign", json={"any": "payload"})).json() == {"agent_id": 10}
    assert await (await client.post("/assign")).json() == {"agent_id": 20}
    assert await (await client.post("/assign-email")).json() == {"agent_email": "ana@example.com"}
    response = await client.get("/assign-text")
    assert response.content_type == "text/plain"
    assert await response.text() == "10"
    response = await client.post("/nobody")
    assert response.status == 503
    assert (await response.json())["error"] == "no_agent"
    response = await client.post("/broken")
    assert response.status == 502
    assert (await response.json())["error"] == "agent_listing_failed"


async def test_picker_against_the_sandbox() -> None:
    async with Sandbox() as sb, sb.client() as client:
        agents = await client.list_agents()
        picker = AgentPicker(client)
        picked = [await picker.pick() for _ in range(len(agents) + 1)]
        assert [a.id for a in picked[:-1]] == sorted(a.id for a in agents)
        assert picked[-1].id == picked[0].id
        tag = agents[0].tags[0].name
        tagged = AgentPicker(client, tag=tag)
        for _ in range(3):
            assert tag in {t.name for t in (await tagged.pick()).tags}
