"""Checkpoints (campaignkit.tracker._checkpoint): a resumed tracker in a new
client never yields a transition again; another launch's checkpoint is refused."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from helpers.exchange import ScriptedExchange
from helpers.fakes import FakeTime
from helpers.tracking import (
    ACK,
    CAMPAIGN,
    KEY,
    S,
    answer,
    collect,
    dep,
    requests_to,
    script,
    triples,
)

from campaignkit import (
    CampaignClient,
    CampaignKitError,
)


async def test_checkpoint_resume_in_a_new_client_never_reyields(
    mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(
        mocked,
        answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "RECEIVED"), dep(3, None)),
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "SUCCESS"), dep(3, "RECEIVED")),
    )
    async with fake_time.install(
        CampaignClient(KEY, campaign_url=CAMPAIGN, exchange=mocked)
    ) as first:
        tracker = first.track(ACK)
        got = [await anext(tracker) for _ in range(3)]
        # c2 RECEIVED->SUCCESS and c3 None->RECEIVED were read, not yet yielded.
        checkpoint = json.loads(json.dumps(tracker.checkpoint()))
        await tracker.aclose()
        assert await collect(tracker) == []
    assert triples(got) == [
        ("c1", None, "RECEIVED"),
        ("c2", None, "RECEIVED"),
        ("c1", "RECEIVED", "SUCCESS"),
    ]
    assert checkpoint["launch_request_id"] == "lr-1"
    assert checkpoint["state"] == "CLAIMED"

    assert requests_to(mocked) == 2
    service = ScriptedExchange()  # the first client closed its exchange
    script(
        service,
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "SUCCESS"), dep(3, "RECEIVED")),
        answer("DONE", dep(1, "DELIVERED"), dep(2, "SUCCESS"), dep(3, "RECEIVED")),
    )
    async with fake_time.install(
        CampaignClient(KEY, campaign_url=CAMPAIGN, exchange=service)
    ) as second:
        resumed = second.track(ACK.status_url, resume=checkpoint)
        assert resumed.counts == Counter({S.SUCCESS: 1, S.RECEIVED: 1, None: 1})
        rest = await collect(resumed)
    assert triples(rest) == [
        ("c2", "RECEIVED", "SUCCESS"),
        ("c3", None, "RECEIVED"),
        ("c1", "SUCCESS", "DELIVERED"),
    ]
    # Every transition exactly once over both trackers.
    assert len(set(triples(got + rest))) == len(got + rest) == 6


async def test_resume_refuses_another_launchs_checkpoint(scripted_client: CampaignClient) -> None:
    checkpoint = {
        "version": 1,
        "launch_request_id": "other",
        "status_url": "other",
        "state": None,
        "statuses": {},
    }
    with pytest.raises(CampaignKitError, match="other"):
        scripted_client.track(ACK, resume=checkpoint)
    with pytest.raises(CampaignKitError):
        scripted_client.track(ACK, resume={"version": 99})
