"""``updates()`` of a tracker and of a ``track_many`` group: the snapshot of
the counts, polls on fake time when iterated alone, one poll shared with the
change iterator, the error raised to each consumer; then against the sandbox."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter

import pytest
from helpers.exchange import Reply, ScriptedExchange
from helpers.fakes import FakeTime
from helpers.tracking import (
    ACK,
    CAMPAIGN,
    KEY,
    URL,
    S,
    answer,
    collect,
    dep,
    requests_to,
    script,
    triples,
)

from campaignkit import (
    CampaignAck,
    CampaignClient,
    CampaignState,
    DeploymentChange,
    NotFoundError,
    User,
    ValidationError,
)
from campaignkit.progress import ProgressUpdate, campaign_update
from campaignkit.sandbox import Sandbox
from campaignkit.tracker import CampaignTracker, TrackerGroup
from campaignkit.tracker._pacer import least_state

C = CampaignState


async def collect_updates(
    tracker: CampaignTracker | TrackerGroup, every: float = 2.0
) -> list[ProgressUpdate]:
    return [update async for update in tracker.updates(every=every)]


def test_a_campaign_update_counts_done_delivered_and_the_top_failures() -> None:
    counts = {
        None: 2,
        S.RECEIVED: 1,
        S.SUCCESS: 1,
        S.DELIVERED: 3,
        S.PUSH_NOTIFICATION: 1,
        S.FAILURE: 2,
        S.INVALID_PHONE: 4,
    }
    got = campaign_update(counts, C.CLAIMED, False)
    assert (got.done, got.total, got.delivered, got.failed) == (11, 14, 4, 6)
    assert got.failures == (("INVALID_PHONE", 4), ("FAILURE", 2))
    assert got.statuses == counts
    assert (got.state, got.finished) == (C.CLAIMED, False)
    counts[S.FAILURE] += 1  # a snapshot: later counts do not change it
    assert got.statuses[S.FAILURE] == 2


def test_the_least_state_of_a_group() -> None:
    assert least_state([C.DONE, C.CLAIMED, C.DONE]) is C.CLAIMED
    assert least_state([C.DONE, C.PENDING]) is C.PENDING
    assert least_state([C.DONE, None]) is None
    assert least_state([]) is None


SCRIPT = [
    answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "RECEIVED"), dep(3, None)),
    answer("CLAIMED", dep(1, "DELIVERED"), dep(2, "RECEIVED"), dep(3, "RECEIVED")),
    answer("CLAIMED", dep(1, "DELIVERED"), dep(2, "INVALID_PHONE"), dep(3, "RECEIVED")),
    answer("DONE", dep(1, "DELIVERED"), dep(2, "INVALID_PHONE"), dep(3, "DELIVERED")),
]


async def test_updates_alone_poll_and_yield_at_most_one_per_every_and_the_final(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(mocked, *SCRIPT)
    # max_interval == poll_interval: one poll a second, no jitter.
    tracker = scripted_client.track(ACK, poll_interval=1.0, max_interval=1.0)
    got = []
    async for update in tracker.updates(every=2.0):
        got.append((fake_time.now - 1000.0, update))
    assert [(at, u.done, u.total, u.state, u.finished) for at, u in got] == [
        (0.0, 0, 3, C.CLAIMED, False),  # the first poll
        (2.0, 2, 3, C.CLAIMED, False),  # the poll at 1 s is held back, 2 s shows more
        (4.0, 3, 3, C.DONE, True),  # read at 3 s, yielded 2 s after the one before
    ]
    assert requests_to(mocked) == 4  # one request per poll, nothing more
    assert fake_time.sleeps == [1.0, 1.0, 1.0, 1.0]
    first, second, final = (u for _, u in got)
    assert (first.rate, first.eta) == (None, None)
    assert (second.rate, second.eta) == (1.0, 1.0)  # 2 done in 2 s, 1 left
    assert (second.delivered, second.failed, second.failures) == (1, 1, (("INVALID_PHONE", 1),))
    assert (final.elapsed, final.eta) == (4.0, 0.0)
    assert final == tracker.snapshot()
    # Polled for updates alone, the tracker kept the last poll's changes only.
    assert triples(await collect(tracker)) == [("c3", "RECEIVED", "DELIVERED")]


async def test_every_is_checked_when_updates_is_called(scripted_client: CampaignClient) -> None:
    with pytest.raises(ValidationError, match="every"):
        scripted_client.track(ACK).updates(every=0)


async def test_the_error_that_ends_tracking_is_raised_once_to_each_consumer(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    mocked.get(URL, status=404, body='{"detail": "not found"}', repeat=True)
    tracker = scripted_client.track(ACK, not_found_grace=3)
    with pytest.raises(NotFoundError):
        await collect_updates(tracker, 1.0)
    polls = requests_to(mocked)
    with pytest.raises(NotFoundError):
        await collect(tracker)
    assert await collect(tracker) == []  # told once
    with pytest.raises(NotFoundError):
        await collect_updates(tracker)  # a new consumer is told too
    assert requests_to(mocked) == polls


async def test_the_change_iterator_and_updates_share_each_poll() -> None:
    """Two tasks, real time: every change reaches the change iterator, the final
    update shows them all, and no poll is made twice (each request comes a
    poll interval after the one before; one more would find no answer)."""
    mocked = ScriptedExchange()
    times: list[float] = []

    def answering(payload: dict[str, object]) -> Reply:
        times.append(time.monotonic())
        return Reply(payload=payload)

    for payload in SCRIPT:
        mocked.get(URL, callback=lambda _r, p=payload: answering(p))
    async with CampaignClient(KEY, campaign_url=CAMPAIGN, exchange=mocked) as client:
        tracker = client.track(ACK, poll_interval=0.05, max_interval=0.05)
        changes: list[DeploymentChange] = []

        async def consume() -> None:
            async for change in tracker:
                changes.append(change)
                await asyncio.sleep(0.01)  # a consumer doing some work

        async with asyncio.timeout(10):
            updates, _ = await asyncio.gather(collect_updates(tracker, 0.05), consume())
    assert requests_to(mocked) == len(SCRIPT)
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.045
    assert triples(changes) == [
        ("c1", None, "RECEIVED"),
        ("c2", None, "RECEIVED"),
        ("c1", "RECEIVED", "DELIVERED"),
        ("c3", None, "RECEIVED"),
        ("c2", "RECEIVED", "INVALID_PHONE"),
        ("c3", "RECEIVED", "DELIVERED"),
    ]
    assert updates[-1].finished
    assert updates[-1].statuses == {S.DELIVERED: 2, S.INVALID_PHONE: 1}
    assert tracker.stats.polls == len(SCRIPT)


async def test_a_group_sums_its_launches_and_shows_the_least_advanced_state(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    ack2 = CampaignAck("queued", "12", "b-2", "lr-2", "/v2/send-campaign/lr-2")
    url2 = f"{CAMPAIGN}/v2/send-campaign/lr-2"
    script(mocked, answer("CLAIMED", dep(1, "RECEIVED")), answer("DONE", dep(1, "DELIVERED")))
    script(
        mocked,
        answer("PENDING", launch="lr-2"),
        answer("CLAIMED", dep(2, "RECEIVED"), launch="lr-2"),
        answer("DONE", dep(2, "FAILURE"), launch="lr-2"),
        url=url2,
    )
    group = scripted_client.track_many([ACK, ack2], poll_interval=1.0, max_interval=1.0)
    got = await collect_updates(group, 1.0)
    assert [(u.done, u.total, u.state, u.finished) for u in got] == [
        (0, 1, C.PENDING, False),
        (1, 2, C.CLAIMED, False),
        (2, 2, C.DONE, True),
    ]
    assert got[-1].failures == (("FAILURE", 1),)
    assert (requests_to(mocked), requests_to(mocked, url2)) == (2, 3)
    # Nobody iterated the changes: the last poll's are kept, no others.
    assert triples(await collect(group)) == [("c2", "RECEIVED", "FAILURE")]


def test_the_progress_of_a_tracker_and_a_group_is_the_one_progress_update(
    scripted_client: CampaignClient,
) -> None:
    """Issue 32: ``tracker.Progress`` re-derived "delivered" beside
    ``ProgressUpdate``; ``progress`` is now the snapshot, the old name
    deprecated."""
    import campaignkit.tracker

    tracker = scripted_client.track(ACK)
    group = scripted_client.track_many([ACK])
    for following in (tracker, group):
        assert isinstance(following.progress, ProgressUpdate)
        assert following.progress == following.snapshot()
    assert "Progress" not in campaignkit.tracker.__all__
    with pytest.warns(DeprecationWarning, match="tracker.Progress is deprecated"):
        assert campaignkit.tracker.Progress is ProgressUpdate


@pytest.mark.parametrize("cls", [CampaignTracker, TrackerGroup])
def test_each_following_class_is_whole_in_its_module(cls: type) -> None:
    """No mixin: what a tracker or a group does is written in its class (the
    updates() of both were a mixin of another module)."""
    assert [base.__name__ for base in cls.__mro__[1:]] == ["AsyncClosing", "object"]


# -- against the sandbox ------------------------------------------------------------


def users(count: int) -> list[User]:
    """Delivered numbers, and every tenth one failing (9914: FAILURE, 9908:
    INVALID_PHONE, alternately)."""
    return [
        User(
            country_code="+57",
            cellphone=f"3001{i:02d}99{14 if i % 20 == 0 else 8:02d}"
            if i % 10 == 0
            else f"3002{i:06d}",
        )
        for i in range(count)
    ]


async def test_updates_follow_a_sandbox_campaign_beside_the_change_iterator(
    client: CampaignClient,
) -> None:
    polls = await client.list_polls()
    ack = await client.send_campaign(polls[0].id, users(40))
    tracker = client.track(ack, until="settled", poll_interval=0.05, max_interval=0.2)
    last: dict[str, S] = {}

    async def consume() -> None:
        async for change in tracker:
            last[change.deployment.conversation_id] = change.current

    async with asyncio.timeout(30):
        updates, _ = await asyncio.gather(collect_updates(tracker, 0.1), consume())
    final = updates[-1]
    assert final.finished
    assert sum(u.finished for u in updates) == 1
    assert final.statuses == Counter(last.values()) == tracker.counts
    assert (final.done, final.total, final.delivered, final.failed) == (40, 40, 36, 4)
    assert final.failures == (("FAILURE", 2), ("INVALID_PHONE", 2))
    assert [u.done for u in updates] == sorted(u.done for u in updates)


async def test_group_updates_alone_against_the_sandbox(sb: Sandbox) -> None:
    async with sb.client() as client:
        poll = (await client.list_polls())[0].id
        acks = [await client.send_campaign(poll, users(10)) for _ in range(3)]
        group = client.track_many(acks, until="settled", poll_interval=0.05, max_interval=0.2)
        async with asyncio.timeout(30):
            updates = await collect_updates(group, 0.1)
    final = updates[-1]
    assert final.finished
    assert final.state is C.DONE
    assert (final.done, final.total, final.delivered, final.failed) == (30, 30, 27, 3)
    assert all(tracker.finished for tracker in group.trackers.values())
