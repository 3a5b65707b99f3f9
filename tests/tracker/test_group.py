"""TrackerGroup (campaignkit.tracker._group): ``client.track_many`` against a
tiny local status server: merged streams, bounded concurrency, checkpoints,
the first failure."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from helpers.tracking import (
    KEY,
    S,
    StatusServer,
    answer,
    collect,
    dep,
    leftover_tasks,
    triples,
)

from campaignkit import (
    CampaignAck,
    CampaignClient,
    NotFoundError,
)
from campaignkit.tracker import TrackerGroup


async def test_track_many_merges_launches_tags_changes_and_bounds_concurrency(
    status_server: StatusServer,
) -> None:
    state = status_server
    url = state.url
    state.delay = 0.02
    launches = [f"lr-{n}" for n in range(6)]
    for n, launch in enumerate(launches):
        state.scripts[launch] = [
            answer("PENDING", launch=launch),
            answer("CLAIMED", dep(n, "RECEIVED"), launch=launch),
            answer("DONE", dep(n, "DELIVERED" if n % 2 else "FAILURE"), launch=launch),
        ]
    acks = [
        CampaignAck("q", "1", "b", launch, f"/v2/send-campaign/{launch}") for launch in launches
    ]
    async with CampaignClient(KEY, campaign_url=url) as client:
        group = client.track_many(acks, concurrency=2, poll_interval=0.01, max_interval=0.02)
        assert isinstance(group, TrackerGroup)
        changes = await asyncio.wait_for(collect(group), 10)
        assert leftover_tasks() == set()
    by_launch: dict[str, list[tuple[str, str | None, str]]] = {}
    for change in changes:
        by_launch.setdefault(change.launch_request_id, []).extend(triples([change]))
    assert by_launch == {
        launch: [
            (f"c{n}", None, "RECEIVED"),
            (f"c{n}", "RECEIVED", "DELIVERED" if n % 2 else "FAILURE"),
        ]
        for n, launch in enumerate(launches)
    }
    assert 1 <= state.max_in_flight <= 2
    assert group.counts == Counter({S.DELIVERED: 3, S.FAILURE: 3})
    progress = group.progress
    assert (progress.done, progress.total, progress.failed, progress.delivered) == (6, 6, 3, 3)
    assert all(tracker.finished for tracker in group.trackers.values())


async def test_track_many_early_break_checkpoint_and_resume(
    status_server: StatusServer,
) -> None:
    state = status_server
    url = state.url
    for n in range(3):
        launch = f"lr-{n}"
        state.scripts[launch] = [
            answer("CLAIMED", dep(n, "RECEIVED"), launch=launch),
            answer("DONE", dep(n, "DELIVERED"), launch=launch),
        ]
    targets = [f"lr-{n}" for n in range(3)]
    async with CampaignClient(KEY, campaign_url=url) as client:
        group = client.track_many(targets, poll_interval=0.01)
        first = await asyncio.wait_for(anext(group), 5)
        checkpoint = json.loads(json.dumps(group.checkpoint()))
        await group.aclose()
        assert leftover_tasks() == set()
        resumed = client.track_many(targets, resume=checkpoint, poll_interval=0.01)
        rest = await asyncio.wait_for(collect(resumed), 5)
    assert (first.launch_request_id, *triples([first])[0]) == ("lr-0", "c0", None, "RECEIVED")
    # lr-1 and lr-2 were read as RECEIVED but not yielded before the checkpoint;
    # the server has moved on since, so the resumed stream shows where they are.
    assert sorted((c.launch_request_id, *triples([c])[0]) for c in rest) == [
        ("lr-0", "c0", "RECEIVED", "DELIVERED"),
        ("lr-1", "c1", None, "DELIVERED"),
        ("lr-2", "c2", None, "DELIVERED"),
    ]


async def test_track_many_raises_the_first_failing_launchs_error(
    status_server: StatusServer,
) -> None:
    state = status_server
    url = state.url
    state.scripts["lr-ok"] = [answer("CLAIMED", dep(1, "RECEIVED"), launch="lr-ok")]
    async with CampaignClient(KEY, campaign_url=url) as client:
        group = client.track_many(["lr-ok", "lr-missing"], poll_interval=0.01, not_found_grace=0)
        with pytest.raises(NotFoundError):
            await asyncio.wait_for(collect(group), 5)
        assert leftover_tasks() == set()
