"""``polls``, ``agents``, ``update-session``, and the connection options
they share with every command, against an in-process sandbox."""

from __future__ import annotations

import asyncio
import io

import orjson
import pytest
from helpers.cli import (
    first_poll,
    run,
)

from campaignkit import User, cli
from campaignkit.sandbox import Sandbox


async def test_polls_table_and_json(sb: Sandbox) -> None:
    table = await run(sb, "polls")
    assert table.code == 0, table.err
    assert table.out.splitlines()[0].split() == ["id", "name"]
    data = (await run(sb, "polls", "--json")).json()
    assert data
    assert {"id", "name"} <= set(data[0])
    assert str(data[0]["id"]) in table.out


async def test_global_flags_before_the_command(sb: Sandbox) -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = ["--json", "--api-key", sb.api_key, "--base-url", sb.base_url, "polls"]
    code = await asyncio.to_thread(cli.run, argv, stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert isinstance(orjson.loads(out.getvalue()), list)


async def test_env_configuration(sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMPAIGNKIT_API_KEY", sb.api_key)
    monkeypatch.setenv("CAMPAIGNKIT_AGENT_URL", sb.agent_url)
    result = await run(None, "agents", "--json")
    assert result.code == 0, result.err
    assert all({"id", "email", "tags"} <= set(a) for a in result.json())


async def test_agents_and_tag_filter(sb: Sandbox) -> None:
    agents = (await run(sb, "agents", "--json")).json()
    tag = agents[0]["tags"][0]["name"]
    tagged = (await run(sb, "agents", "--json", "--tag", tag.upper())).json()
    assert tagged
    assert all(tag in {t["name"] for t in a["tags"]} for a in tagged)
    assert len(tagged) <= len(agents)
    table = await run(sb, "agents")
    assert agents[0]["email"] in table.out


async def test_update_session_and_history(sb: Sandbox) -> None:
    poll = await first_poll(sb)
    async with sb.client() as client:
        user = User(cellphone="3000000042", country_code="+57", user_session_keys={"n": "1"})
        ack = await client.send_campaign(poll, [user])
        async for _ in client.track(ack, until="settled", poll_interval=0.05, timeout=30):
            pass
    reply = await sb.reply("3000000042", text="hello there")
    session = reply["session_external_id"]

    updated = await run(sb, "update-session", session, "plan=gold", "--keys-json", '{"score": 5}')
    assert updated.code == 0, updated.err
    assert session in updated.out

    history = await run(sb, "history", session, "--json")
    assert history.code == 0, history.err
    texts = [entry["message"]["text"] for entry in history.json()]
    assert "hello there" in texts
    assert len(texts) >= 3
    table = await run(sb, "history", session)
    assert "USER" in table.out
    assert "hello there" in table.out


async def test_update_session_needs_keys(sb: Sandbox) -> None:
    result = await run(sb, "update-session", "sr-1")
    assert result.code == 2
    assert "KEY=VALUE" in result.err
    result = await run(sb, "update-session", "sr-1", "novalue")
    assert result.code == 2
