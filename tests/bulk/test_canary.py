"""The canary, end to end against the sandbox: its first recipients are sent
alone and followed, the rest goes only if their outcomes hold; otherwise the
run pauses with the figures, a resumed rerun sends the rest without judging
again, and a judgement a send left unfinished is taken up by the next one."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.canaries import FAST, launches, people, stuck

from campaignkit import CampaignClient, Canary, ValidationError
from campaignkit.ledger import SqliteLedger
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)


async def poll_of(client: CampaignClient) -> int:
    return (await client.list_polls())[0].id


async def test_a_canary_that_holds_is_sent_alone_and_followed_then_the_rest(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    report = await client.send_bulk(
        poll, people(range(100)), journal=journal, run="r", chunk_size=20, canary=FAST
    )
    assert report.counts["accepted"] == 100
    assert report.paused is None
    sent = await launches(sb)
    # The canary's exact size in a chunk of its own, then chunks of 20.
    assert [len(launch) for launch in sent] == [15, 20, 20, 20, 20, 5]
    async with SqliteLedger(journal) as ledger:
        # Its outcomes were followed (no follow=True: only the canary's).
        outcomes = {o.phone for o in await ledger.outcomes("r")}
        assert outcomes == {f"+57{c}" for c in sent[0]}
        info = await ledger.run_info("r")
        assert info is not None
        assert info.paused is None
        options = await ledger.run_options("r")
        assert options["canary"] == {
            "size": 15,
            "wait": 20.0,
            "min_delivered": 0.8,
            "max_failed": 0.05,
        }


async def test_a_failing_canary_pauses_the_run_and_a_resumed_rerun_sends_the_rest(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    await sb.fail_prefix("+5732", rate=1.0, status="FAILURE_BY_META_CHOSE_NOT_DELIVER")
    users = people(range(5), prefix="32") + people(range(45), prefix="31")
    options: dict[str, Any] = {"journal": journal, "run": "r", "chunk_size": 20, "canary": FAST}
    first = await client.send_bulk(poll, users, **options)
    assert first.counts["accepted"] == 15
    assert first.paused is not None
    assert first.paused.startswith("canary: 33.3% of 15 canary recipients failed (5)")
    assert first.deferred_reasons == {"paused": 35}
    assert sum(map(len, await launches(sb))) == 15
    async with SqliteLedger(journal) as ledger:
        info = await ledger.run_info("r")
        assert info is not None
        assert info.paused is not None
        assert info.paused.reason == "canary"
        assert "over the canary's max_failed of 0.05" in info.paused.detail
        # Paused, a rerun sends nothing more.
        again = await client.send_bulk(poll, users, **options)
        assert again.deferred_reasons == {"paused": 35}
        assert await ledger.resume_run("r") == 35
    # Resumed by a person: the rest goes, without a canary judged again.
    last = await asyncio.wait_for(client.send_bulk(poll, users, **options), 10)
    assert last.counts["accepted"] == 50
    assert last.paused is None
    got = [c for launch in await launches(sb) for c in launch]
    assert len(got) == len(set(got)) == 50


async def test_a_canary_not_settled_within_its_wait_pauses_the_run(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    # Outcomes not settled are written every FLUSH_SECONDS: a wait past it.
    canary = Canary(size=10, wait=timedelta(seconds=6), min_delivered=0.8, max_failed=0.5)
    users = stuck(range(5)) + people(range(30))
    report = await asyncio.wait_for(
        client.send_bulk(poll, users, journal=journal, run="r", canary=canary), 30
    )
    assert report.counts["accepted"] == 10
    assert report.paused is not None
    assert report.paused.startswith("canary: 50% of 10 canary recipients were delivered (5)")
    assert "within 6 s: under the canary's min_delivered of 0.8" in report.paused


async def test_a_judgement_a_send_left_is_taken_up_by_the_next_send(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll, journal = await poll_of(client), tmp_path / "runs.db"
    patient = Canary(size=10, wait=timedelta(minutes=10), min_delivered=0.8, max_failed=0.5)
    users = stuck(range(5)) + people(range(30))
    options: dict[str, Any] = {"journal": journal, "run": "r"}
    sending = asyncio.create_task(client.send_bulk(poll, users, canary=patient, **options))
    async with SqliteLedger(journal) as ledger:
        for _ in range(500):  # until the canary is being judged
            info = await ledger.run_info("r")
            if info is not None and info.paused is not None:
                break
            await asyncio.sleep(0.02)
        assert info is not None
        assert info.paused is not None
        assert info.paused.detail.startswith("judging its first 10 recipients")
        sending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await sending
        # Left paused while judged: a send without the canary sends nothing more.
        plain = await client.send_bulk(poll, users, **options)
        assert plain.counts["accepted"] == 10
        assert plain.paused is not None
        assert plain.paused.startswith("canary: judging its first 10")
    # The next send with a canary judges it, its wait counted from the pause.
    short = Canary(size=10, wait=timedelta(seconds=0.5), min_delivered=0.8, max_failed=0.5)
    last = await asyncio.wait_for(client.send_bulk(poll, users, canary=short, **options), 20)
    assert last.counts["accepted"] == 10
    assert last.paused is not None
    assert last.paused.startswith("canary: 50% of 10 canary recipients were delivered (5)")
    assert sum(map(len, await launches(sb))) == 10


@pytest.mark.parametrize("canary", ["200", Canary, {"size": 200}])
async def test_a_bad_canary_is_refused_naming_it(client: CampaignClient, canary: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        await client.send_bulk(1001, people(range(3)), canary=canary)
    assert [field for field, _ in raised.value.problems] == ["canary"]
