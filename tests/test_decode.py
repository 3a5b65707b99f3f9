"""Decoding (campaignkit._wire.decode) of campaign status answers: any body decodes
or is a ResponseError, and a shape error names its path (through the tracker,
which does not retry it and applies nothing of it)."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from typing import Any

import pytest
from helpers.exchange import ScriptedExchange
from helpers.fakes import FakeTime
from helpers.tracking import (
    ACK,
    URL,
    S,
    answer,
    collect,
    dep,
    requests_to,
    script,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit import (
    CampaignClient,
    ResponseError,
)
from campaignkit._wire.decode import StatusAnswer, decoder

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(body=st.binary(max_size=64) | json_values.map(lambda v: json.dumps(v).encode()))
@settings(max_examples=200, deadline=None)
def test_any_answer_decodes_or_raises_a_response_error(body: bytes) -> None:
    with contextlib.suppress(ResponseError):
        decoder(StatusAnswer)(body, 200, {})


@pytest.mark.parametrize(
    ("entry", "path"),
    [
        ({"conversation_id": "c2", "status": 5}, "$.deployments[1].status"),
        (["not", "an", "object"], "$.deployments[1]"),
        ({"conversation_id": 7, "status": "RECEIVED"}, "$.deployments[1].conversation_id"),
        ({"status": "RECEIVED"}, "$.deployments[1].conversation_id"),
        (dep(2, "RECEIVED", username=3), "$.deployments[1].username"),
        (dep(2, "RECEIVED", cellphone=["x"]), "$.deployments[1].cellphone"),
    ],
)
async def test_malformed_entry_is_a_response_error_with_its_path(
    scripted_client: CampaignClient,
    mocked: ScriptedExchange,
    fake_time: FakeTime,
    entry: Any,
    path: str,
) -> None:
    script(mocked, answer("CLAIMED", dep(1, "RECEIVED"), entry))
    with pytest.raises(ResponseError) as info:
        await collect(scripted_client.track(ACK))
    assert info.value.path == path
    assert path in str(info.value)
    assert requests_to(mocked) == 1  # a shape error is not retried


async def test_malformed_entry_after_a_good_poll_reports_its_index(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    good = [dep(i, "RECEIVED") for i in range(20)]
    bad = [dict(d) for d in good]
    bad[17]["status"] = {"nested": True}
    script(mocked, answer("CLAIMED", *good), answer("CLAIMED", *bad))
    tracker = scripted_client.track(ACK)
    with pytest.raises(ResponseError) as info:
        await collect(tracker)
    assert info.value.path == "$.deployments[17].status"
    # Nothing of the bad poll was applied.
    assert tracker.counts == Counter({S.RECEIVED: 20})


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ([1, 2], "$"),
        ({"launch_request_id": "lr-1", "status": "DONE", "poll_id": 1}, "$.deployments"),
        (
            {"launch_request_id": "lr-1", "status": "WHAT", "poll_id": 1, "deployments": []},
            "$.status",
        ),
        (
            {"launch_request_id": "lr-1", "status": "DONE", "poll_id": "1", "deployments": []},
            "$.poll_id",
        ),
    ],
)
async def test_wrong_top_level_shape(
    scripted_client: CampaignClient,
    mocked: ScriptedExchange,
    fake_time: FakeTime,
    body: Any,
    path: str,
) -> None:
    mocked.get(URL, body=json.dumps(body), headers={"Content-Type": "application/json"})
    with pytest.raises(ResponseError) as info:
        await collect(scripted_client.track(ACK))
    assert info.value.path == path
