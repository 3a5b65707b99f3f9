"""send_bulk against the sandbox over real HTTP: exactly-once under faults and
after a kill -9 (resumed from the journal)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import random
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.processes import run_process

from campaignkit import BulkReport, CampaignClient
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(30)

HELPER = Path(__file__).parents[1] / "helpers" / "bulk_child.py"
_spec = importlib.util.spec_from_file_location("bulk_child", HELPER)
assert _spec is not None
assert _spec.loader is not None
child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(child)


@pytest.fixture
def sandbox_options() -> dict[str, Any]:
    return {"seed": 11}


def child_env() -> dict[str, str]:
    """The test's environment; the child imports campaignkit from the checkout."""
    return {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}


def child_argv(sb: Sandbox, poll: str, journal: Path, count: int) -> list[str]:
    """A bulk send of ``count`` users journaled in ``journal``, in its own process."""
    return [
        *(sys.executable, str(HELPER), sb.campaign_url, sb.api_key),
        *(poll, str(journal), str(count)),
    ]


async def spawn(argv: list[str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=child_env()
    )


async def received(sb: Sandbox) -> Counter[str]:
    """How many times the default company received each phone."""
    snapshot = await sb.snapshot(company=sb.company_id, launch="-")
    return Counter(snapshot["companies"][0]["phone_counts"])


async def first_poll(client: CampaignClient) -> int:
    return (await client.list_polls())[0].id


def chunk_phones(report: BulkReport, outcome: str, users: list[Any]) -> set[str]:
    chunks = getattr(report, outcome)
    return {"+52" + child_cellphone(users[p]) for c in chunks for p in c.positions}


def child_cellphone(item: Any) -> str:
    return str(item["cellphone"] if isinstance(item, dict) else item.cellphone)


def assert_partition(report: BulkReport) -> None:
    """Every input position is in exactly one bucket."""
    positions = [
        p
        for name in ("accepted", "rejected", "ambiguous")
        for c in getattr(report, name)
        for p in c.positions
    ]
    positions += [i.position for i in report.invalid] + [d.position for d in report.duplicates]
    assert sorted(positions) == list(range(report.total))
    assert sum(report.counts.values()) == report.total


async def test_50000_users_each_received_exactly_once(sb: Sandbox) -> None:
    count = 50_000
    users = list(child.make_users(count))
    async with sb.client() as client:
        report = await client.send_bulk(await first_poll(client), iter(users), concurrency=4)
    assert_partition(report)
    assert report.complete
    expected = child.expected_phones(count)
    assert report.counts["accepted"] == len(expected)
    assert report.counts["invalid"] == len(range(0, count, 97))
    assert report.counts["duplicate"] > 900
    got = await received(sb)
    assert set(got) == expected
    assert set(got.values()) == {1}
    assert len(report.acks) == (len(expected) + 999) // 1000


async def test_faults_every_user_in_one_bucket_none_received_twice(sb: Sandbox) -> None:
    count = 20_000
    users = list(child.make_users(count))
    route = {"route": "send_campaign"}
    await sb.set_faults(
        {"kind": "429", "rate": 0.06, "retry_after": 0, **route},
        {"kind": "500", "rate": 0.03, **route},
        {"kind": "502", "rate": 0.03, "when": "after", **route},
        {"kind": "504", "rate": 0.02, "when": "after", **route},
        {"kind": "drop", "rate": 0.03, **route},
        {"kind": "drop", "rate": 0.03, "when": "after", **route},
        seed=3,
    )
    async with sb.client(max_retries=1) as client:
        poll = await first_poll(client)
        report = await client.send_bulk(poll, iter(users), chunk_size=100, concurrency=4)
    assert_partition(report)
    fired = {
        rule["kind"] + str(rule.get("when")): rule["fired"]
        for rule in (await sb.admin("GET", "/faults"))["faults"]
    }
    assert sum(fired.values()) >= 0.1 * len(report.accepted + report.rejected + report.ambiguous)
    assert report.ambiguous, fired
    got = await received(sb)
    assert max(got.values()) == 1
    accepted = chunk_phones(report, "accepted", users)
    ambiguous = chunk_phones(report, "ambiguous", users)
    rejected = chunk_phones(report, "rejected", users)
    assert accepted | ambiguous | rejected == child.expected_phones(count)
    assert accepted <= set(got)  # accepted: received, once
    assert not rejected & set(got)  # rejected: surely not received
    assert set(got) - accepted <= ambiguous  # the only unknowns are ambiguous chunks
    # Retrying the rejected users deliberately completes them, still once each.
    async with sb.client() as client:
        await sb.clear_faults()
        retry = await client.send_bulk(poll, report.users_for("rejected"), chunk_size=100)
    assert retry.complete
    got = await received(sb)
    assert max(got.values()) == 1
    assert rejected <= set(got)


async def test_killed_mid_send_then_resumed_from_journal(sb: Sandbox, tmp_path: Path) -> None:
    count = 20_000
    journal = tmp_path / "run.db"
    # Each send is processed at once and answered 0.3 s later: the chunk whose
    # users were just counted is surely in flight when the kill lands.
    await sb.set_faults(
        {"kind": "latency", "seconds": 0.3, "route": "send_campaign", "when": "after"}
    )
    async with sb.client() as client:
        poll = str(await first_poll(client))
    argv = child_argv(sb, poll, journal, count)
    process = await spawn(argv)
    try:
        for _ in range(1000):
            await asyncio.sleep(0.01)
            if sum((await received(sb)).values()) >= 3000:
                break
        os.kill(process.pid, signal.SIGKILL)
    finally:
        await process.communicate()
    assert process.returncode == -signal.SIGKILL
    killed_at = sum((await received(sb)).values())
    expected = child.expected_phones(count)
    assert 3000 <= killed_at < len(expected)

    finished = await run_process(*argv, env=child_env(), timeout=60)
    assert finished.code == 0, finished.err[-2000:]
    out = orjson.loads(finished.out)
    assert out["resumed_accepted"] >= 1
    assert out["resumed_ambiguous"] >= 1  # in flight at the kill: reported, not resent
    assert out["counts"]["rejected"] == 0
    got = await received(sb)
    assert max(got.values()) == 1
    ambiguous = set(out["ambiguous"])
    assert set(got) <= expected
    assert expected - set(got) <= ambiguous  # only chunks reported ambiguous may be missing
    assert out["counts"]["accepted"] + out["counts"]["ambiguous"] == len(expected)


@pytest.mark.timeout(120)
async def test_killed_at_20_random_moments_then_resumed(sb: Sandbox, tmp_path: Path) -> None:
    count = 6000
    journal = tmp_path / "run.db"
    await sb.set_faults({"kind": "latency", "seconds": 0.15, "route": "send_campaign"})
    async with sb.client() as client:
        poll = str(await first_poll(client))
    argv = child_argv(sb, poll, journal, count)
    # Each kill lands a random time after the child's first new request arrived.
    moments = random.Random(20).sample(range(0, 400, 10), 20)  # milliseconds
    for moment in moments:
        before = sum((await received(sb)).values())
        process = await spawn(argv)
        for _ in range(500):
            if process.returncode is not None or sum((await received(sb)).values()) > before:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(moment / 1000)
        if process.returncode is None:
            os.kill(process.pid, signal.SIGKILL)
        await process.communicate()
        assert max((await received(sb)).values(), default=1) == 1
    finished = await run_process(*argv, env=child_env(), timeout=60)
    assert finished.code == 0, finished.err[-2000:]
    out = orjson.loads(finished.out)
    got = await received(sb)
    expected = child.expected_phones(count)
    assert max(got.values()) == 1
    assert set(got) <= expected
    assert expected - set(got) <= set(out["ambiguous"])
    assert out["counts"]["accepted"] + out["counts"]["ambiguous"] == len(expected)
    assert out["counts"]["rejected"] == 0
    # The kills did land mid-run: some users were in flight at one of them.
    assert out["counts"]["ambiguous"] > 0
