"""The diff (campaignkit.tracker._diff): ranks, stale reads, final statuses,
keys, status spellings; pure on decoded answers and through a tracker."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from typing import Any

import pytest
from helpers.exchange import ScriptedExchange
from helpers.fakes import FakeTime
from helpers.tracking import (
    ACK,
    S,
    answer,
    collect,
    dep,
    now,
    script,
    triples,
)

from campaignkit import (
    CampaignClient,
)
from campaignkit._wire.decode import StatusAnswer, StatusEntry, decoder
from campaignkit.errors import ResponseError
from campaignkit.status import status_from_wire
from campaignkit.tracker._diff import View


async def test_the_view_diffs_bytes_without_io() -> None:
    view = View("lr-1")
    first = answer("CLAIMED", *[dep(i, "RECEIVED") for i in range(10)])
    assert len(view.apply(decode(first), now())) == 10
    second = answer("CLAIMED", *[dep(i, "RECEIVED") for i in range(10)])
    second["deployments"][4]["status"] = "SUCCESS"
    changes = view.apply(decode(second), now())
    assert [(key, c.previous, c.current) for key, c in changes] == [("c4", S.RECEIVED, S.SUCCESS)]
    assert view.apply(decode(second), now()) == []


async def test_backward_stale_read_is_not_yielded_and_final_never_moves(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(
        mocked,
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "FAILURE")),
        answer("CLAIMED", dep(1, "DELIVERED"), dep(2, "RETRY")),  # 2: final never moves
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "FAILURE")),  # 1: stale read
        answer("CLAIMED", dep(1, None), dep(2, None)),  # staler still
        answer("DONE", dep(1, "DELIVERED"), dep(2, "DELIVERED")),
    )
    tracker = scripted_client.track(ACK)
    changes = await collect(tracker)
    assert triples(changes) == [
        ("c1", None, "SUCCESS"),
        ("c2", None, "FAILURE"),
        ("c1", "SUCCESS", "DELIVERED"),
    ]
    assert tracker.stats.stale == 5
    assert tracker.counts == Counter({S.DELIVERED: 1, S.FAILURE: 1})
    assert tracker.result is not None
    assert [d.status for d in tracker.result.deployments] == [S.DELIVERED, S.FAILURE]


async def test_keys_fall_back_to_service_id_then_cellphone(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    a = {"service_id": "s1", "cellphone": "3001", "status": "RECEIVED"}
    b = {"conversation_id": None, "service_id": None, "cellphone": "3002", "status": "RECEIVED"}
    script(
        mocked,
        answer("CLAIMED", a, b),
        answer("DONE", {**a, "status": "DELIVERED"}, {**b, "status": "REVOKED"}),
    )
    changes = await collect(scripted_client.track(ACK))
    assert [(c.deployment.service_id, c.deployment.cellphone, c.current) for c in changes] == [
        ("s1", "3001", S.RECEIVED),
        ("", "3002", S.RECEIVED),
        ("s1", "3001", S.DELIVERED),
        ("", "3002", S.REVOKED),
    ]
    assert changes[0].deployment.conversation_id == ""


async def test_push_misspelling_unknown_status_and_spelling_flip(
    scripted_client: CampaignClient, mocked: ScriptedExchange, fake_time: FakeTime
) -> None:
    script(
        mocked,
        answer("CLAIMED", dep(1, "PUSH_NOTIFATION"), dep(2, "RECEIVED")),
        answer("CLAIMED", dep(1, "PUSH_NOTIFICATION"), dep(2, "TRACKER_TEST_NEW_STATUS")),
        answer("DONE", dep(1, "PUSH_NOTIFATION"), dep(2, "TRACKER_TEST_NEW_STATUS")),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        changes = await collect(scripted_client.track(ACK))
    assert triples(changes) == [
        ("c1", None, "PUSH_NOTIFICATION"),
        ("c2", None, "RECEIVED"),
        ("c2", "RECEIVED", "TRACKER_TEST_NEW_STATUS"),
    ]
    assert changes[0].current is S.PUSH_NOTIFICATION
    assert changes[2].current.is_unknown
    assert any("TRACKER_TEST_NEW_STATUS" in str(w.message) for w in caught)


def decode(data: dict[str, Any]) -> Any:
    return decoder(StatusAnswer)(json.dumps(data).encode(), 200, {})


async def test_a_result_keeps_the_statuses_held_when_it_was_made() -> None:
    # Its Deployments are made as they are read, from the statuses of then.
    view = View("lr-1")
    first = answer("CLAIMED", *[dep(i, "RECEIVED") for i in range(600)])
    view.apply(decode(first), now())
    result = view.result(decode(first))
    later = answer("CLAIMED", *[dep(i, "SUCCESS") for i in range(600)])
    view.apply(decode(later), now())
    assert {d.status for d in result.deployments} == {S.RECEIVED}
    assert result.deployments[-1].conversation_id == "c599"
    assert result.deployments[10:12] == tuple(result.deployments)[10:12]
    assert {d.status for d in view.result(decode(first)).deployments} == {S.SUCCESS}


def test_a_view_collecting_entries_accepts_the_changes_it_would_yield() -> None:
    """Bulk follow's view: the entries of the changes, not the changes."""
    answers = [
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "FAILURE"), dep(3, "PUSH_NOTIFATION")),
        answer("CLAIMED", dep(1, "DELIVERED"), dep(2, "RETRY"), dep(3, "PUSH_NOTIFICATION")),
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "FAILURE"), dep(4, "RECEIVED")),
    ]
    yielding, collecting = View("lr-1"), View("lr-1")
    collected: list[StatusEntry] = []
    collecting.changed = collected
    for data in answers:
        changes = yielding.apply(decode(data), now())
        before = len(collected)
        assert collecting.apply(decode(data), now()) == []
        assert [(e.conversation_id, status_from_wire(e.status)) for e in collected[before:]] == [
            (c.deployment.conversation_id, c.current) for _, c in changes
        ]
    assert len(collected) == 5
    assert collecting.counts == yielding.counts
    # An answer with a deployment of no identifier is refused whole: nothing collected.
    keyless = {"conversation_id": None, "service_id": None, "cellphone": None, "status": "SUCCESS"}
    with pytest.raises(ResponseError):
        collecting.apply(decode(answer("CLAIMED", dep(5, "RECEIVED"), keyless)), now())
    assert len(collected) == 5
    assert collecting.counts == yielding.counts


def pairs(changes: list[tuple[str, Any]]) -> list[tuple[str, S | None, S]]:
    return [(key, c.previous, c.current) for key, c in changes]


def test_retry_then_success_is_a_change_and_counts_follow_it() -> None:
    view = View("lr-1")
    view.apply(decode(answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "RECEIVED"))), now())
    assert view.counts == Counter({S.RECEIVED: 2})
    assert pairs(view.apply(decode(answer("CLAIMED", dep(1, "RETRY"), dep(2, "RECEIVED"))), now()))
    assert view.counts == Counter({S.RETRY: 1, S.RECEIVED: 1})
    changes = view.apply(decode(answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "RECEIVED"))), now())
    assert pairs(changes) == [("c1", S.RETRY, S.SUCCESS)]
    assert view.counts == Counter({S.SUCCESS: 1, S.RECEIVED: 1})
    assert view.stale == 0
    assert not view.settled()
    view.apply(decode(answer("DONE", dep(1, "SUCCESS"), dep(2, "FAILURE"))), now())
    assert view.settled()


def test_an_unknown_status_ranks_below_a_final_one() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        unknown = status_from_wire("QUEUED_ON_MARS")
        view = View("lr-1")
        view.apply(decode(answer("CLAIMED", dep(1, "QUEUED_ON_MARS"), dep(2, "DELIVERED"))), now())
        changes = view.apply(
            decode(answer("CLAIMED", dep(1, "DELIVERED"), dep(2, "QUEUED_ON_MARS"))), now()
        )
    assert pairs(changes) == [("c1", unknown, S.DELIVERED)]
    assert view.stale == 1  # DELIVERED never goes back to an unknown status
    assert view.counts == Counter({S.DELIVERED: 2})


def test_entries_after_a_null_newcomer_or_an_unchanged_one_are_read_in_the_same_poll() -> None:
    view = View("lr-1")
    keyed_by_service = dep(9, "RECEIVED", conversation_id=None)
    view.apply(decode(answer("CLAIMED", keyed_by_service, dep(2, "RECEIVED"))), now())
    changes = view.apply(
        decode(answer("CLAIMED", dep(1, None), keyed_by_service, dep(2, "SUCCESS"))), now()
    )
    assert pairs(changes) == [("c2", S.RECEIVED, S.SUCCESS)]
    assert view.current == {"s9": "RECEIVED", "c2": "SUCCESS", "c1": None}


def test_an_answer_that_grows_reads_its_newcomers() -> None:
    view = View("lr-1")
    view.apply(decode(answer("CLAIMED", *[dep(i, "RECEIVED") for i in range(8)])), now())
    grown = answer("CLAIMED", *[dep(i, "RECEIVED") for i in range(9)])
    assert pairs(view.apply(decode(grown), now())) == [("c8", None, S.RECEIVED)]
    assert view.counts == Counter({S.RECEIVED: 9})


def test_restored_counts_add_up_and_the_state_starts_unknown() -> None:
    view = View("lr-1")
    assert view.state is None
    view.restore({"c1": "RECEIVED", "c2": "RECEIVED", "c3": None})
    assert view.counts == Counter({S.RECEIVED: 2, None: 1})


def test_a_change_carries_the_deployment_as_read_and_a_result_its_ids() -> None:
    view = View("lr-1")
    entry = dep(1, "RECEIVED", business_scope_id="scope-7", username="ana", cellphone=None)
    read = decode(answer("CLAIMED", entry))
    [(_, change)] = view.apply(read, now())
    deployment = change.deployment
    assert (deployment.business_scope_id, deployment.username) == ("scope-7", "ana")
    assert deployment.cellphone == ""
    result = view.result(read)
    assert (result.launch_request_id, result.poll_id) == ("lr-1", 12)


def test_a_keyless_entry_after_changes_rolls_the_whole_answer_back() -> None:
    view = View("lr-1")
    view.apply(decode(answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "PUSH_NOTIFICATION"))), now())
    before, counts = dict(view.current), Counter(view.counts)
    keyless = dep(3, "RECEIVED", conversation_id=None, service_id=None, cellphone=None)
    bad = answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "PUSH_NOTIFATION"), keyless)
    with pytest.raises(ResponseError, match="no conversation_id, service_id or cellphone") as err:
        view.apply(decode(bad), now())
    assert err.value.path == "$.deployments[2].conversation_id"
    assert view.current == before
    assert view.counts == counts
