"""The run that protects itself, end to end against the sandbox: a
cool-down across two runs, a dry run whose report equals the real run that
follows it, an input over max_recipients refused, a breaker that pauses a
run whose recipients fail (sb.fail_prefix), and a template paused by the
network (its webhook into the ledger) pausing every running run."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.servers import serving

from campaignkit import Breaker, CampaignClient, User, ValidationError
from campaignkit.ledger import PLANNED, SqliteLedger
from campaignkit.sandbox import Sandbox
from campaignkit.webhooks import webhook_app

pytestmark = pytest.mark.timeout(60)


def people(numbers: range, prefix: str = "31") -> list[User]:
    return [User(cellphone=f"{prefix}{n:08d}", country_code="+57") for n in numbers]


async def received(sb: Sandbox) -> list[dict[str, Any]]:
    snapshot = await sb.snapshot()
    return [user for launch in snapshot["companies"][0]["launches"] for user in launch["users"]]


async def poll_of(client: CampaignClient) -> int:
    return (await client.list_polls())[0].id


async def test_a_cooldown_holds_across_two_runs(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    first = await client.send_bulk(poll, people(range(5)), journal=journal, run="monday")
    assert first.counts["accepted"] == 5
    second = await client.send_bulk(
        poll, people(range(10)), journal=journal, run="tuesday", cooldown=timedelta(hours=24)
    )
    assert (second.counts["accepted"], second.counts["deferred"]) == (5, 5)
    assert second.deferred_reasons == {"cooldown": 5}
    got = [user["cellphone"] for user in await received(sb)]
    assert sorted(got) == sorted(f"31{n:08d}" for n in range(10))  # nobody twice


async def test_a_dry_run_reports_what_the_real_run_then_does_and_changes_nothing(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    await client.send_bulk(poll, people(range(3)), journal=journal, run="earlier")
    async with SqliteLedger(journal) as ledger:
        await ledger.suppress(["+57 3100000005"], reason="opted out")
    users: list[Any] = [
        *people(range(12)),
        User(cellphone="3100000004", country_code="+57"),  # a duplicate
        {"cellphone": "12", "country_code": "+57"},  # invalid
    ]
    options: dict[str, Any] = {
        "journal": journal,
        "run": "today",
        "cooldown": timedelta(hours=24),
        "daily_limit": 9,
        "chunk_size": 4,
    }
    before = len(await received(sb))
    dry = await client.send_bulk(poll, users, dry_run=True, **options)
    assert len(await received(sb)) == before  # nothing sent
    async with SqliteLedger(journal) as ledger:
        assert [info.run for info in await ledger.runs()] == ["earlier"]  # nothing kept
        assert await ledger.suppression("+573100000005") is not None
    real = await client.send_bulk(poll, users, **options)
    assert dry.counts == real.counts
    assert dry.deferred_reasons == real.deferred_reasons
    # 3 cooled down, 1 suppressed; of the 8 left, the 6 the limit allows (3 used today).
    assert dry.counts == {
        "accepted": 6,
        "rejected": 0,
        "ambiguous": 0,
        "deferred": 5,
        "invalid": 1,
        "duplicate": 1,
        "suppressed": 1,
    }
    assert dry.deferred_reasons == {"cooldown": 3, "daily limit": 2}
    assert len(await received(sb)) == before + 6


async def test_an_input_over_max_recipients_is_refused_before_anything_is_sent(
    sb: Sandbox, client: CampaignClient
) -> None:
    poll = await poll_of(client)
    for given in (people(range(6)), iter(people(range(6)))):
        with pytest.raises(ValidationError) as raised:
            await client.send_bulk(poll, given, max_recipients=5)
        assert [field for field, _ in raised.value.problems] == ["max_recipients"]
        assert "max_recipients=5" in str(raised.value)
    assert await received(sb) == []
    sent = await client.send_bulk(poll, iter(people(range(5))), max_recipients=5)
    assert sent.counts["accepted"] == 5


async def test_a_breaker_pauses_a_run_whose_recipients_fail(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    await sb.fail_prefix("+5732", rate=1.0, status="FAILURE_BY_META_CHOSE_NOT_DELIVER")
    users = people(range(30), prefix="31") + people(range(20), prefix="32")
    options: dict[str, Any] = {
        "journal": journal,
        "run": "risky",
        "breaker": Breaker(max_failed=0.2, over=50),
        "chunk_size": 10,
    }
    first = await client.send_bulk(poll, users, follow=True, **options)
    assert first.counts["accepted"] == 50
    async with SqliteLedger(journal) as ledger:
        info = await ledger.run_info("risky")
        assert info is not None
        assert info.paused is not None
        assert info.paused.reason == "breaker"
        # Judged as the launches settle: on 30, 40 or 50 of them.
        assert "settled recipients failed" in info.paused.detail
    # Paused: more users of the run are planned, never sent, and the report says why.
    before = len(await received(sb))
    more = await client.send_bulk(poll, users + people(range(50, 60)), **options)
    assert len(await received(sb)) == before
    assert more.paused is not None
    assert more.paused.startswith("breaker: ")
    assert more.deferred_reasons == {"paused": 10}
    # Resumed: sent.
    async with SqliteLedger(journal) as ledger:
        assert await ledger.resume_run("risky") == 10
    last = await client.send_bulk(poll, users + people(range(50, 60)), **options)
    assert last.counts["accepted"] == 60
    assert len(await received(sb)) == before + 10


async def test_a_breaker_pauses_a_run_while_it_sends(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    """Followed while it sends, the run pauses mid-send: nothing more is
    handed over, the rest is deferred (paused), and a resumed rerun sends it."""
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    await sb.fail_prefix("+5732", rate=1.0, status="FAILURE_BY_META_CHOSE_NOT_DELIVER")
    users = people(range(20), prefix="32") + people(range(180), prefix="31")
    options: dict[str, Any] = {
        "journal": journal,
        "run": "risky",
        "breaker": Breaker(max_failed=0.2, over=50),
        "chunk_size": 10,
        "concurrency": 1,
        "rate_limit": 4,  # 20 chunks over 5 s: the failures are known long before
    }
    first = await client.send_bulk(poll, users, follow=True, **options)
    assert first.paused is not None
    assert first.paused.startswith("breaker: ")
    sent = len(await received(sb))
    assert 20 <= sent < 120
    assert first.counts["accepted"] == sent
    assert first.deferred_reasons == {"paused": 200 - sent}
    async with SqliteLedger(journal) as ledger:
        assert await ledger.resume_run("risky") == 200 - sent
    last = await client.send_bulk(poll, users, **{**options, "rate_limit": None})
    assert last.counts["accepted"] == 200
    got = [user["cellphone"] for user in await received(sb)]
    assert len(got) == len(set(got)) == 200  # the rest once, nobody twice


async def test_a_paused_template_pauses_every_running_run(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    async with SqliteLedger(journal) as ledger:
        for run in ("a", "b"):
            await ledger.start_run(run, str(poll))
        async with serving(webhook_app(lambda event: None, ledger=ledger)) as url:
            await sb.set_webhook(f"{url}/webhook", kinds=["template_status"])
            await sb.change_template_status("spring_sale", "DISABLED")
            for _ in range(200):
                if all(info.paused for info in await ledger.runs()):
                    break
                await asyncio.sleep(0.02)
        for info in await ledger.runs():
            assert info.paused is not None
            assert info.paused.reason == "template"
            assert "template spring_sale is DISABLED" in info.paused.detail
    sent = await client.send_bulk(poll, people(range(4)), journal=journal, run="a")
    assert sent.counts["deferred"] == 4
    assert await received(sb) == []
    async with SqliteLedger(journal) as ledger:
        assert (await ledger.counts("a"))[PLANNED] == 4


async def test_a_dry_run_reports_each_lines_share_as_the_real_run_spreads_them(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    lines = (await sb.snapshot(users=False))["companies"][0]["lines"]
    # Four people kept on the first line by an earlier run.
    await client.send_bulk(poll, people(range(4)), journal=journal, run="earlier", lines=lines[:1])
    options: dict[str, Any] = {"journal": journal, "run": "today", "lines": lines, "chunk_size": 3}
    dry = await client.send_bulk(poll, people(range(12)), dry_run=True, **options)
    assert len(await received(sb)) == 4  # nothing sent
    async with SqliteLedger(journal) as ledger:
        assert [info.run for info in await ledger.runs()] == ["earlier"]
    real = await client.send_bulk(poll, people(range(12)), **options)
    spread = Counter(user["line"] for user in (await received(sb))[4:])
    assert dry.lines == dict(spread)
    assert real.lines == {}  # a dry run's figure
    assert sum(dry.lines.values()) == 12
    assert dry.lines[lines[0]] >= 4
