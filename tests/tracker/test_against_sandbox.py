"""CampaignTracker against the sandbox: real runs, real HTTP, real faults.

Magic numbers: a cellphone ending in ``99NN`` ends in status NN of the spec's
table (00-02 stay in progress for good). The sandbox's admin snapshot records
each deployment's status history, which the yielded transitions are checked
against.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any, TypedDict

import pytest

from campaignkit import (
    CampaignAck,
    CampaignClient,
    CampaignState,
    DeploymentChange,
    DeploymentStatus,
    TimeoutError,
    User,
)
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)

S = DeploymentStatus


class Fast(TypedDict):
    poll_interval: float
    max_interval: float


FAST: Fast = {"poll_interval": 0.01, "max_interval": 0.05}


def magic_users(numbers: range | list[int], prefix: str = "3001") -> list[User]:
    return [User(cellphone=f"{prefix}{n:02d}99{n:02d}", country_code="+57") for n in numbers]


def normal(status: str | None) -> DeploymentStatus | None:
    return None if status is None else DeploymentStatus(status)


@pytest.fixture
def sandbox_options() -> dict[str, Any]:
    return {"seed": 7}


async def send(client: CampaignClient, users: list[User]) -> CampaignAck:
    polls = await client.list_polls()
    return await client.send_campaign(polls[0].id, users)


async def histories(sb: Sandbox, launch: str) -> dict[str, dict[str, Any]]:
    snapshot = await sb.snapshot(launch=launch)
    (company,) = [c for c in snapshot["companies"] if c["launches"]]
    (record,) = company["launches"]
    return {user["conversation_id"]: user for user in record["users"]}


async def collect_into(tracker: Any, got: list[DeploymentChange]) -> None:
    async for change in tracker:
        got.append(change)


def leftover(baseline: set[asyncio.Task[Any]]) -> set[asyncio.Task[Any]]:
    """Tasks started since ``baseline``, other than this test's and the
    sandbox server's own connection handlers (same loop)."""
    return {
        task
        for task in asyncio.all_tasks() - baseline
        if task is not asyncio.current_task()
        and not task.get_coro().__qualname__.startswith("RequestHandler.")  # type: ignore[union-attr]
    }


def check_consistent(
    changes: list[DeploymentChange], users: dict[str, dict[str, Any]], *, complete: bool
) -> None:
    """Per deployment: a chain None -> a -> b ... that is a subsequence of the
    sandbox's history, each transition once; with ``complete``, ending at the
    history's last status."""
    by_id: dict[str, list[DeploymentChange]] = {}
    for change in changes:
        by_id.setdefault(change.deployment.conversation_id, []).append(change)
    assert set(by_id) <= set(users)
    for conversation_id, chain in by_id.items():
        history = [normal(item["status"]) for item in users[conversation_id]["history"]]
        previous: DeploymentStatus | None = None
        position = 0
        for change in chain:
            assert change.previous is previous, (conversation_id, chain, history)
            assert change.deployment.status is change.current
            assert change.deployment.cellphone == users[conversation_id]["cellphone"]
            # the current status appears later in the history than the previous one
            assert change.current in history[position:], (conversation_id, chain, history)
            position = history.index(change.current, position) + 1
            previous = change.current
        if complete:
            assert previous is history[-1], (conversation_id, chain, history)
    if complete:
        assert set(by_id) == set(users)


def final_counts(users: dict[str, dict[str, Any]]) -> Counter[DeploymentStatus | None]:
    return Counter(
        normal(user["history"][-1]["status"]) if user["history"] else None
        for user in users.values()
    )


async def test_all_thirty_outcomes_match_the_sandbox_history(
    sb: Sandbox, client: CampaignClient
) -> None:
    delivered = User(cellphone="3005550101", country_code="+57")
    ack = await send(client, [*magic_users(range(30)), delivered])
    states: list[CampaignState] = []
    tracker = client.track(ack, on_state=states.append, **FAST)
    changes = [change async for change in tracker]
    assert tracker.state is CampaignState.DONE
    assert states[-1] is CampaignState.DONE
    assert tracker.result is not None
    assert tracker.result.status is CampaignState.DONE
    check_consistent(changes, await histories(sb, ack.launch_request_id), complete=False)

    # Let every deployment reach its end, then read the rest of the story.
    await sb.set_clock(advance=120)
    rest = [change async for change in client.track(ack, resume=tracker.checkpoint(), **FAST)]
    users = await histories(sb, ack.launch_request_id)
    everything = changes + rest
    check_consistent(everything, users, complete=True)
    transitions = [(c.deployment.conversation_id, c.previous, c.current) for c in everything]
    assert len(transitions) == len(set(transitions))

    resumed_counts = Counter({c.deployment.conversation_id: c.current for c in everything}.values())
    assert resumed_counts == final_counts(users)
    finals = {c.deployment.cellphone[-4:]: c.current for c in everything}
    assert finals["9929"] is S.FAILURE_BY_PAYMENT_ISSUE
    assert finals["9905"] is S.PUSH_NOTIFICATION  # sent as PUSH_NOTIFATION
    assert finals["9901"] is S.RECEIVED_BY_WORKER  # stuck in progress for good
    assert finals["9901"].is_in_progress
    assert finals["0101"] is S.DELIVERED  # any other number is delivered


async def test_counts_equal_the_sandbox_state_when_it_is_still(
    sb: Sandbox, client: CampaignClient
) -> None:
    ack = await send(client, magic_users(range(30)))
    await sb.set_clock(advance=120)  # every deployment at its end: nothing moves
    tracker = client.track(ack, **FAST)
    changes = [change async for change in tracker]
    users = await histories(sb, ack.launch_request_id)
    assert tracker.counts == final_counts(users)
    assert len(changes) == 30  # None -> final, once each
    assert tracker.progress.total == 30
    assert tracker.progress.done == 27
    assert tracker.result is not None
    assert Counter(d.status for d in tracker.result.deployments) == tracker.counts


@pytest.mark.parametrize("sandbox_options", [{"speed": 5, "seed": 11}])
async def test_thirty_percent_of_status_calls_faulted(sb: Sandbox, client: CampaignClient) -> None:
    await sb.set_faults(
        {"kind": "500", "route": "campaign_status", "rate": 0.1},
        {"kind": "429", "route": "campaign_status", "rate": 0.1, "retry_after": 0.02},
        {"kind": "drop", "route": "campaign_status", "rate": 0.1},
        {"kind": "truncated", "route": "campaign_status", "rate": 0.1},
        seed=3,
    )
    ack = await send(client, magic_users(range(30)))
    # Settled never comes (00-02 are stuck): many polls until the timeout.
    tracker = client.track(ack, until="settled", timeout=2.5, **FAST)
    changes: list[DeploymentChange] = []
    with pytest.raises(TimeoutError):
        await collect_into(tracker, changes)
    assert tracker.state is CampaignState.DONE
    await sb.set_clock(advance=120)
    resumed = client.track(ack, resume=tracker.checkpoint(), **FAST)
    rest = [change async for change in resumed]
    users = await histories(sb, ack.launch_request_id)
    check_consistent(changes + rest, users, complete=True)
    transitions = [(c.deployment.conversation_id, c.previous, c.current) for c in changes + rest]
    assert len(transitions) == len(set(transitions))
    stats = tracker.stats
    assert stats.polls >= 20, stats
    # About 34% of calls fail (four rules of 10%); retried, never fatal.
    assert 0.15 * stats.polls <= stats.retries <= 0.6 * stats.polls, stats
    faults = await sb.admin("GET", "/faults")
    assert sum(rule["fired"] for rule in faults["faults"]) >= stats.retries


async def test_until_settled_ends_when_nothing_is_in_progress(
    sb: Sandbox, client: CampaignClient
) -> None:
    ack = await send(client, magic_users(range(3, 30)))
    tracker = client.track(ack, until="settled", timeout=30, **FAST)
    changes = [change async for change in tracker]
    users = await histories(sb, ack.launch_request_id)
    assert not any(status is None or status.is_in_progress for status in tracker.counts)
    assert tracker.counts == final_counts(users)
    check_consistent(changes, users, complete=True)


async def test_until_settled_times_out_on_the_stuck_ones(
    sb: Sandbox, client: CampaignClient
) -> None:
    ack = await send(client, magic_users(range(30)))
    tracker = client.track(ack, until="settled", timeout=1.5, **FAST)
    with pytest.raises(TimeoutError) as info:
        await collect_into(tracker, [])
    last = info.value.last_status
    assert last is not None
    stuck = {
        d.cellphone[-4:] for d in last.deployments if d.status is None or d.status.is_in_progress
    }
    assert stuck >= {"9900", "9901", "9902"}
    assert tracker.stats.elapsed >= 1.5


async def test_checkpoint_resume_across_a_new_client(sb: Sandbox) -> None:
    baseline = asyncio.all_tasks()
    async with sb.client() as first:
        ack = await send(first, magic_users(range(30)))
        tracker = first.track(ack, **FAST)
        before = []
        async for change in tracker:
            before.append(change)
            if len(before) == 10:
                break
        saved = json.dumps(tracker.checkpoint())
    assert leftover(baseline) == set()
    await sb.set_clock(advance=120)
    async with sb.client() as second:
        after = [c async for c in second.track(ack.status_url, resume=json.loads(saved), **FAST)]
    users = await histories(sb, ack.launch_request_id)
    check_consistent(before + after, users, complete=True)
    transitions = [(c.deployment.conversation_id, c.previous, c.current) for c in before + after]
    assert len(transitions) == len(set(transitions))


async def test_track_many_over_twenty_launches(sb: Sandbox, client: CampaignClient) -> None:
    acks = [
        await send(client, magic_users([3 + n % 27, 4 + n % 25], prefix=f"31{n:02d}"))
        for n in range(20)
    ]
    await sb.set_clock(advance=5)
    baseline = asyncio.all_tasks()
    group = client.track_many(acks, concurrency=4, until="settled", timeout=30, **FAST)
    changes = [change async for change in group]
    assert leftover(baseline) == set()
    assert {c.launch_request_id for c in changes} == {a.launch_request_id for a in acks}
    total: Counter[DeploymentStatus | None] = Counter()
    for ack in acks:
        users = await histories(sb, ack.launch_request_id)
        mine = [c for c in changes if c.launch_request_id == ack.launch_request_id]
        check_consistent(mine, users, complete=True)
        total += final_counts(users)
    assert group.counts == total
    assert group.progress.done == group.progress.total == 40


async def test_early_break_against_the_sandbox_leaves_nothing_running(
    sb: Sandbox, client: CampaignClient
) -> None:
    ack = await send(client, magic_users(range(30)))
    baseline = asyncio.all_tasks()
    async for _ in client.track(ack, **FAST):
        break
    assert leftover(baseline) == set()
    connector = client.session.connector
    assert connector is not None
    assert not connector._acquired


@pytest.mark.timeout(60)
def test_progress_bot_example_posts_throttled_messages_and_a_summary() -> None:
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "progress_bot.py"
    result = subprocess.run(
        [sys.executable, str(example), "--users", "60", "--every", "0.3", "--speed", "10"],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("bot> ")]
    progress = [line for line in lines if line.startswith("bot> [")]
    assert progress, result.stdout
    assert ": Finished; request " in lines[-1]
    assert "60/60 settled (100% of recipients): " in result.stdout  # nobody still waiting
    # throttled: far fewer progress messages than changes
    assert len(progress) < 20
