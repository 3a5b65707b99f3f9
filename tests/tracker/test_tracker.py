"""CampaignTracker (campaignkit.tracker._tracker): the stream, failures, the
``until`` modes and its lifecycle, against scripted status answers (the
``scripted_client`` over a ScriptedExchange) and, for cancellation and open
connections, a tiny local status server.

Time is fake: ``fake_time`` (installed on the client) advances at every wait,
so backoffs of minutes run instantly and are asserted.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from helpers.exchange import ScriptedExchange
from helpers.fakes import FakeTime
from helpers.tracking import (
    ACK,
    KEY,
    URL,
    S,
    StatusServer,
    answer,
    collect,
    collect_into,
    dep,
    leftover_tasks,
    now,
    requests_to,
    script,
    triples,
)

from campaignkit import (
    CampaignClient,
    CampaignKitError,
    CampaignState,
    CampaignStatus,
    CampaignTracker,
    Deployment,
    DeploymentChange,
    NotFoundError,
    TimeoutError,
)


async def test_scripted_sequence_yields_each_change_once_with_state_counts_and_waits(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(
        mocked,
        answer("PENDING"),
        answer("CLAIMED", dep(1, None), dep(2, None)),
        answer("CLAIMED", dep(1, "RECEIVED"), dep(2, None)),
        answer("CLAIMED", dep(1, "RECEIVED"), dep(2, None)),  # quiet
        answer("CLAIMED", dep(1, "RECEIVED"), dep(2, None)),  # quiet
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "RECEIVED")),
        answer("DONE", dep(1, "DELIVERED"), dep(2, "INVALID_PHONE")),
    )
    states: list[CampaignState] = []
    seen: list[tuple[CampaignState | None, Counter[Any], int]] = []
    tracker = scripted_client.track(ACK, on_state=states.append, max_interval=3.0)
    changes = []
    async for change in tracker:
        changes.append(change)
        seen.append((tracker.state, tracker.counts, len(tracker.result.deployments)))  # type: ignore[union-attr]

    assert triples(changes) == [
        ("c1", None, "RECEIVED"),
        ("c1", "RECEIVED", "SUCCESS"),
        ("c2", None, "RECEIVED"),
        ("c1", "SUCCESS", "DELIVERED"),
        ("c2", "RECEIVED", "INVALID_PHONE"),
    ]
    assert all(c.launch_request_id == "lr-1" for c in changes)
    assert changes[0].deployment == Deployment("c1", "s1", "300000001", None, None, S.RECEIVED)
    assert changes[0].observed_at.tzinfo is not None
    # When a change is yielded, state/counts/result already show its poll.
    assert seen[0] == (CampaignState.CLAIMED, Counter({S.RECEIVED: 1, None: 1}), 2)
    assert seen[-1] == (CampaignState.DONE, Counter({S.DELIVERED: 1, S.INVALID_PHONE: 1}), 2)
    assert states == [CampaignState.PENDING, CampaignState.CLAIMED, CampaignState.DONE]
    progress = tracker.progress
    assert (progress.done, progress.total, progress.failed, progress.delivered) == (2, 2, 1, 1)
    assert tracker.result is not None
    assert tracker.result.status is CampaignState.DONE
    assert [d.status for d in tracker.result.deployments] == [S.DELIVERED, S.INVALID_PHONE]
    assert tracker.stats.polls == 7
    assert tracker.stats.changes == 5
    assert tracker.stats.retries == 0
    assert requests_to(mocked) == 7
    # Waits: quiet polls back off (jittered, bounded by max_interval); a poll
    # with a change brings the next one back to poll_interval.
    pending_quiet, claimed_quiet, after_change, quiet1, quiet2, after_change2 = fake_time.sleeps
    assert 1.0 <= pending_quiet <= 2.0
    assert 1.5 <= claimed_quiet <= 3.0  # nothing taken yet: no change, second quiet poll
    assert after_change == 1.0
    assert 1.0 <= quiet1 <= 2.0
    assert 1.5 <= quiet2 <= 3.0  # ceiling 4 capped by max_interval=3, jitter in its upper half
    assert after_change2 == 1.0
    assert tracker.stats.elapsed == pytest.approx(sum(fake_time.sleeps))
    fake_time.now += 100  # elapsed stops with the tracking
    assert tracker.stats.elapsed == pytest.approx(sum(fake_time.sleeps))


async def test_not_found_is_tolerated_during_the_grace_period(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    not_found: tuple[int, str, dict[str, str]] = (404, '{"detail": "Launch request not found"}', {})
    script(mocked, not_found, not_found, answer("DONE", dep(1, "DELIVERED")))
    tracker = scripted_client.track("lr-1", not_found_grace=30)
    assert triples(await collect(tracker)) == [("c1", None, "DELIVERED")]
    assert tracker.stats.retries == 2


async def test_not_found_after_the_grace_period_is_raised(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    mocked.get(URL, status=404, body='{"detail": "not found"}', repeat=True)
    tracker = scripted_client.track(ACK, not_found_grace=10, poll_interval=1.0)
    with pytest.raises(NotFoundError) as info:
        await collect(tracker)
    assert info.value.status == 404
    assert sum(fake_time.sleeps) >= 10.0
    assert sum(fake_time.sleeps[:-1]) < 10.0
    assert requests_to(mocked) == len(fake_time.sleeps) + 1
    # The stream is over: iterating again ends at once.
    assert await collect(tracker) == []


async def test_not_found_after_a_successful_read_is_raised_at_once(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(mocked, answer("CLAIMED", dep(1, "RECEIVED")), (404, '{"detail": "gone"}', {}))
    tracker = scripted_client.track(ACK)
    got: list[DeploymentChange] = []
    with pytest.raises(NotFoundError):
        await collect_into(tracker, got)
    assert triples(got) == [("c1", None, "RECEIVED")]
    assert requests_to(mocked) == 2


async def test_timeout_raises_campaignkit_timeout_with_the_last_status(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(mocked, answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "DELIVERED")))
    mocked.get(
        URL, payload=answer("CLAIMED", dep(1, "RECEIVED_BY_WORKER"), dep(2, "SUCCESS")), repeat=True
    )
    tracker = scripted_client.track(ACK, timeout=20.0, max_interval=8.0)
    got: list[DeploymentChange] = []
    with pytest.raises(TimeoutError) as info:
        await collect_into(tracker, got)
    assert triples(got) == [
        ("c1", None, "RECEIVED"),
        ("c2", None, "DELIVERED"),
        ("c1", "RECEIVED", "RECEIVED_BY_WORKER"),
    ]
    error = info.value
    assert isinstance(error, builtins_timeout())
    assert isinstance(error, CampaignKitError)
    last = error.last_status
    assert isinstance(last, CampaignStatus)
    assert last.status is CampaignState.CLAIMED
    assert [d.status for d in last.deployments] == [S.RECEIVED_BY_WORKER, S.DELIVERED]
    assert "lr-1" in str(error)
    # The last poll happens at the deadline, not one wait before it.
    assert sum(fake_time.sleeps) == pytest.approx(20.0)


def builtins_timeout() -> type[BaseException]:
    import builtins

    return builtins.TimeoutError


async def test_timeout_while_failing_carries_the_last_good_status_and_the_cause(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(mocked, answer("PENDING"))
    mocked.get(URL, status=500, body="{}", repeat=True)
    tracker = scripted_client.track(ACK, timeout=15.0)
    with pytest.raises(TimeoutError) as info:
        await collect(tracker)
    assert info.value.last_status is not None
    assert info.value.last_status.status is CampaignState.PENDING
    assert type(info.value.__cause__).__name__ == "ServerError"
    assert tracker.stats.retries >= 2


async def test_until_settled_goes_past_done_until_nothing_is_in_progress(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(
        mocked,
        answer("DONE", dep(1, "RECEIVED"), dep(2, "SUCCESS")),
        answer("DONE", dep(1, "RETRY"), dep(2, "SUCCESS")),
        answer("DONE", dep(1, "FAILURE"), dep(2, "SUCCESS")),
        answer("DONE", dep(1, "FAILURE"), dep(2, "DELIVERED")),  # never read
    )
    tracker = scripted_client.track(ACK, until="settled")
    changes = await collect(tracker)
    assert triples(changes) == [
        ("c1", None, "RECEIVED"),
        ("c2", None, "SUCCESS"),
        ("c1", "RECEIVED", "RETRY"),
        ("c1", "RETRY", "FAILURE"),
    ]
    assert requests_to(mocked) == 3
    assert tracker.finished


async def test_until_done_stops_at_done_even_with_deployments_in_progress(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(mocked, answer("DONE", dep(1, "RECEIVED")), answer("DONE", dep(1, "DELIVERED")))
    tracker = scripted_client.track(ACK)
    assert triples(await collect(tracker)) == [("c1", None, "RECEIVED")]
    assert requests_to(mocked) == 1


async def test_until_settled_times_out_on_stuck_deployments(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    mocked.get(URL, payload=answer("DONE", dep(1, "RECEIVED"), dep(2, "DELIVERED")), repeat=True)
    tracker = scripted_client.track(ACK, until="settled", timeout=60)
    with pytest.raises(TimeoutError) as info:
        await collect(tracker)
    assert info.value.last_status is not None
    assert tracker.counts == Counter({S.RECEIVED: 1, S.DELIVERED: 1})
    progress = tracker.progress
    assert (progress.done, progress.total, progress.failed, progress.delivered) == (1, 2, 0, 1)


async def test_early_break_and_aclose_leave_no_task(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    mocked.get(URL, payload=answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "RECEIVED")), repeat=True)
    tracker = scripted_client.track(ACK)
    async for _ in tracker:
        break
    assert asyncio.all_tasks() == {asyncio.current_task()}
    await tracker.aclose()
    await tracker.aclose()
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert await collect(tracker) == []
    async with scripted_client.track(ACK) as other:
        await anext(other)
    assert other.finished
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_cancelling_the_consumer_mid_request_leaves_no_task_and_no_connection(
    status_server: StatusServer,
) -> None:
    state = status_server
    url = state.url
    state.delay = 5.0
    state.scripts["lr-1"] = [answer("DONE", dep(1, "DELIVERED"))]
    async with CampaignClient(KEY, campaign_url=url) as client:
        tracker = client.track(ACK)

        async def consume() -> list[DeploymentChange]:
            return await collect(tracker)

        task = asyncio.create_task(consume())
        for _ in range(200):
            await asyncio.sleep(0.01)
            if state.in_flight:
                break
        assert state.in_flight == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert leftover_tasks() == set()
        connector = client.session.connector
        assert connector is not None
        assert not connector._acquired  # the response was closed, not left open
        # The tracker is still usable: the cancelled poll is made again.
        state.delay = 0.0
        changes = await asyncio.wait_for(collect(tracker), 5)
        assert triples(changes) == [("c1", None, "DELIVERED")]


async def test_cancelling_the_consumer_while_waiting_leaves_no_task(
    status_server: StatusServer,
) -> None:
    state = status_server
    url = state.url
    state.scripts["lr-1"] = [answer("CLAIMED", dep(1, "RECEIVED"))]
    async with CampaignClient(KEY, campaign_url=url) as client:
        tracker = client.track(ACK, poll_interval=30.0)
        first = await asyncio.wait_for(anext(tracker), 5)
        assert first.current is S.RECEIVED
        task = asyncio.create_task(anext(tracker))  # waits 30 s before the next poll
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert leftover_tasks() == set()
        assert state.polls["lr-1"] == 1


def test_tracker_is_exported() -> None:
    assert CampaignTracker.__name__ == "CampaignTracker"
    change = DeploymentChange(
        Deployment("c", "s", "1", None, None, S.SUCCESS), None, S.SUCCESS, now(), "lr"
    )
    with pytest.raises(AttributeError):
        change.current = S.DELIVERED  # type: ignore[misc]
    assert not hasattr(change, "__dict__")
