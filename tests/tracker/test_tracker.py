"""CampaignTracker against scripted status answers (a ScriptedExchange) and a
tiny local server (for cancellation, open connections and track_many's bound).

Time is fake: the client's ``sleep=`` advances a fake clock the tracker reads
through ``clock=``, so backoffs of minutes run instantly and are asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import warnings
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from helpers.exchange import ScriptedExchange, dropped_after_sending
from helpers.fakes import FakeTime
from helpers.servers import serving
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit import (
    CampaignAck,
    CampaignClient,
    CampaignKitError,
    CampaignState,
    CampaignStatus,
    CampaignTracker,
    Deployment,
    DeploymentChange,
    DeploymentStatus,
    NotFoundError,
    ResponseError,
    TimeoutError,
)
from campaignkit._decode import StatusAnswer, decoder
from campaignkit.tracker import Progress, TrackerGroup
from campaignkit.tracker._diff import View

S = DeploymentStatus
KEY = "sk_test_tracker_123456"
CAMPAIGN = "https://campaigns.example.com"
URL = f"{CAMPAIGN}/v2/send-campaign/lr-1"
ACK = CampaignAck("queued", "12", "b-1", "lr-1", "/v2/send-campaign/lr-1")


def dep(i: int | str, status: str | None, **extra: Any) -> dict[str, Any]:
    entry = {
        "conversation_id": f"c{i}",
        "service_id": f"s{i}",
        "cellphone": f"30000000{i}",
        "business_scope_id": None,
        "username": None,
        "status": status,
    }
    entry.update(extra)
    return entry


def answer(state: str, *deployments: dict[str, Any], launch: str = "lr-1") -> dict[str, Any]:
    return {
        "launch_request_id": launch,
        "status": state,
        "poll_id": 12,
        "deployments": list(deployments),
    }


def triples(changes: list[DeploymentChange]) -> list[tuple[str, str | None, str]]:
    return [
        (
            c.deployment.conversation_id,
            None if c.previous is None else c.previous.value,
            c.current.value,
        )
        for c in changes
    ]


@pytest.fixture
def fake() -> FakeTime:
    return FakeTime()


@pytest.fixture
def mocked() -> ScriptedExchange:
    return ScriptedExchange()


@pytest.fixture
async def client(fake: FakeTime, mocked: ScriptedExchange) -> AsyncIterator[CampaignClient]:
    async with CampaignClient(KEY, campaign_url=CAMPAIGN, sleep=fake.sleep, exchange=mocked) as c:
        yield c


def script(m: ScriptedExchange, *answers: Any, url: str = URL) -> None:
    """Register answers in order; a dict is a 200 JSON answer, a tuple
    ``(status, body, headers)`` anything else, an exception is raised."""
    for item in answers:
        if isinstance(item, dict):
            m.get(url, payload=item)
        elif isinstance(item, BaseException):
            m.get(url, exception=item)
        else:
            status, body, headers = item
            m.get(url, status=status, body=body, headers=headers)


def requests_to(m: ScriptedExchange, url: str = URL) -> int:
    return len(m.calls("GET", url))


async def collect(tracker: Any) -> list[DeploymentChange]:
    return [change async for change in tracker]


async def collect_into(tracker: Any, got: list[DeploymentChange]) -> None:
    async for change in tracker:
        got.append(change)


# -- the stream -------------------------------------------------------------


async def test_scripted_sequence_yields_each_change_once_with_state_counts_and_waits(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
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
    tracker = client.track(ACK, on_state=states.append, clock=fake.clock, max_interval=3.0)
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
    assert tracker.progress == Progress(done=2, total=2, failed=1, delivered=1)
    assert tracker.result is not None
    assert tracker.result.status is CampaignState.DONE
    assert [d.status for d in tracker.result.deployments] == [S.DELIVERED, S.INVALID_PHONE]
    assert tracker.stats.polls == 7
    assert tracker.stats.changes == 5
    assert tracker.stats.retries == 0
    assert requests_to(mocked) == 7
    # Waits: quiet polls back off (jittered, bounded by max_interval); a poll
    # with a change brings the next one back to poll_interval.
    pending_quiet, claimed_quiet, after_change, quiet1, quiet2, after_change2 = fake.sleeps
    assert 1.0 <= pending_quiet <= 2.0
    assert 1.5 <= claimed_quiet <= 3.0  # nothing taken yet: no change, second quiet poll
    assert after_change == 1.0
    assert 1.0 <= quiet1 <= 2.0
    assert 1.5 <= quiet2 <= 3.0  # ceiling 4 capped by max_interval=3, jitter in its upper half
    assert after_change2 == 1.0
    assert tracker.stats.elapsed == pytest.approx(sum(fake.sleeps))
    fake.now += 100  # elapsed stops with the tracking
    assert tracker.stats.elapsed == pytest.approx(sum(fake.sleeps))


async def test_interval_grows_to_max_while_nothing_changes(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(mocked, *[answer("PENDING")] * 8, answer("DONE", dep(1, "DELIVERED")))
    changes = await collect(
        client.track(ACK, clock=fake.clock, poll_interval=0.5, max_interval=10.0)
    )
    assert triples(changes) == [("c1", None, "DELIVERED")]
    ceilings = [min(10.0, 0.5 * 2**q) for q in range(1, 9)]
    for wait, ceiling in zip(fake.sleeps, ceilings, strict=True):
        assert max(0.5, ceiling / 2) <= wait <= ceiling
    assert fake.sleeps[-1] >= 5.0


async def test_push_misspelling_unknown_status_and_spelling_flip(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(
        mocked,
        answer("CLAIMED", dep(1, "PUSH_NOTIFATION"), dep(2, "RECEIVED")),
        answer("CLAIMED", dep(1, "PUSH_NOTIFICATION"), dep(2, "TRACKER_TEST_NEW_STATUS")),
        answer("DONE", dep(1, "PUSH_NOTIFATION"), dep(2, "TRACKER_TEST_NEW_STATUS")),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        changes = await collect(client.track(ACK, clock=fake.clock))
    assert triples(changes) == [
        ("c1", None, "PUSH_NOTIFICATION"),
        ("c2", None, "RECEIVED"),
        ("c2", "RECEIVED", "TRACKER_TEST_NEW_STATUS"),
    ]
    assert changes[0].current is S.PUSH_NOTIFICATION
    assert changes[2].current.is_unknown
    assert any("TRACKER_TEST_NEW_STATUS" in str(w.message) for w in caught)


async def test_backward_stale_read_is_not_yielded_and_final_never_moves(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(
        mocked,
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "FAILURE")),
        answer("CLAIMED", dep(1, "DELIVERED"), dep(2, "RETRY")),  # 2: final never moves
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "FAILURE")),  # 1: stale read
        answer("CLAIMED", dep(1, None), dep(2, None)),  # staler still
        answer("DONE", dep(1, "DELIVERED"), dep(2, "DELIVERED")),
    )
    tracker = client.track(ACK, clock=fake.clock)
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
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    a = {"service_id": "s1", "cellphone": "3001", "status": "RECEIVED"}
    b = {"conversation_id": None, "service_id": None, "cellphone": "3002", "status": "RECEIVED"}
    script(
        mocked,
        answer("CLAIMED", a, b),
        answer("DONE", {**a, "status": "DELIVERED"}, {**b, "status": "REVOKED"}),
    )
    changes = await collect(client.track(ACK, clock=fake.clock))
    assert [(c.deployment.service_id, c.deployment.cellphone, c.current) for c in changes] == [
        ("s1", "3001", S.RECEIVED),
        ("", "3002", S.RECEIVED),
        ("s1", "3001", S.DELIVERED),
        ("", "3002", S.REVOKED),
    ]
    assert changes[0].deployment.conversation_id == ""


# -- failures -----------------------------------------------------------------


async def test_transient_failures_are_retried_counted_and_retry_after_overrides_the_wait(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(
        mocked,
        answer("CLAIMED", dep(1, "RECEIVED")),
        (429, '{"detail": "slow down"}', {"Retry-After": "7"}),
        (503, '{"detail": "busy"}', {"Retry-After": "11"}),
        (500, '{"detail": "boom"}', {}),
        dropped_after_sending(),
        (502, "<html><body>Bad Gateway</body></html>", {"Content-Type": "text/html"}),
        (200, "<html>proxy</html>", {"Content-Type": "text/html"}),
        answer("DONE", dep(1, "DELIVERED")),
    )
    tracker = client.track(ACK, clock=fake.clock, max_interval=4.0)
    changes = await collect(tracker)
    assert triples(changes) == [("c1", None, "RECEIVED"), ("c1", "RECEIVED", "DELIVERED")]
    assert tracker.stats.retries == 6
    assert tracker.stats.polls == 8
    first, after_429, after_503, *backoffs = fake.sleeps
    assert first == 1.0
    assert after_429 == 7.0  # Retry-After overrides the backoff...
    assert after_503 == 11.0  # ...even above max_interval
    assert all(1.0 <= wait <= 4.0 for wait in backoffs)


async def test_not_found_is_tolerated_during_the_grace_period(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    not_found = (404, '{"detail": "Launch request not found"}', {})
    script(mocked, not_found, not_found, answer("DONE", dep(1, "DELIVERED")))
    tracker = client.track("lr-1", clock=fake.clock, not_found_grace=30)
    assert triples(await collect(tracker)) == [("c1", None, "DELIVERED")]
    assert tracker.stats.retries == 2


async def test_not_found_after_the_grace_period_is_raised(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    mocked.get(URL, status=404, body='{"detail": "not found"}', repeat=True)
    tracker = client.track(ACK, clock=fake.clock, not_found_grace=10, poll_interval=1.0)
    with pytest.raises(NotFoundError) as info:
        await collect(tracker)
    assert info.value.status == 404
    assert sum(fake.sleeps) >= 10.0
    assert sum(fake.sleeps[:-1]) < 10.0
    assert requests_to(mocked) == len(fake.sleeps) + 1
    # The stream is over: iterating again ends at once.
    assert await collect(tracker) == []


async def test_not_found_after_a_successful_read_is_raised_at_once(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(mocked, answer("CLAIMED", dep(1, "RECEIVED")), (404, '{"detail": "gone"}', {}))
    tracker = client.track(ACK, clock=fake.clock)
    got: list[DeploymentChange] = []
    with pytest.raises(NotFoundError):
        await collect_into(tracker, got)
    assert triples(got) == [("c1", None, "RECEIVED")]
    assert requests_to(mocked) == 2


async def test_timeout_raises_campaignkit_timeout_with_the_last_status(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(mocked, answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "DELIVERED")))
    mocked.get(
        URL, payload=answer("CLAIMED", dep(1, "RECEIVED_BY_WORKER"), dep(2, "SUCCESS")), repeat=True
    )
    tracker = client.track(ACK, clock=fake.clock, timeout=20.0, max_interval=8.0)
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
    assert sum(fake.sleeps) == pytest.approx(20.0)


def builtins_timeout() -> type[BaseException]:
    import builtins

    return builtins.TimeoutError


async def test_timeout_while_failing_carries_the_last_good_status_and_the_cause(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(mocked, answer("PENDING"))
    mocked.get(URL, status=500, body="{}", repeat=True)
    tracker = client.track(ACK, clock=fake.clock, timeout=15.0)
    with pytest.raises(TimeoutError) as info:
        await collect(tracker)
    assert info.value.last_status is not None
    assert info.value.last_status.status is CampaignState.PENDING
    assert type(info.value.__cause__).__name__ == "ServerError"
    assert tracker.stats.retries >= 2


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
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime, entry: Any, path: str
) -> None:
    script(mocked, answer("CLAIMED", dep(1, "RECEIVED"), entry))
    with pytest.raises(ResponseError) as info:
        await collect(client.track(ACK, clock=fake.clock))
    assert info.value.path == path
    assert path in str(info.value)
    assert requests_to(mocked) == 1  # a shape error is not retried


async def test_malformed_entry_after_a_good_poll_reports_its_index(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    good = [dep(i, "RECEIVED") for i in range(20)]
    bad = [dict(d) for d in good]
    bad[17]["status"] = {"nested": True}
    script(mocked, answer("CLAIMED", *good), answer("CLAIMED", *bad))
    tracker = client.track(ACK, clock=fake.clock)
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
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime, body: Any, path: str
) -> None:
    mocked.get(URL, body=json.dumps(body), headers={"Content-Type": "application/json"})
    with pytest.raises(ResponseError) as info:
        await collect(client.track(ACK, clock=fake.clock))
    assert info.value.path == path


# -- status_url -----------------------------------------------------------------


@pytest.mark.parametrize(
    "status_url",
    [
        "https://evil.example.com/v2/send-campaign/lr-1",
        "//evil.example.com/v2/send-campaign/lr-1",
        "http://campaigns.example.com/v2/send-campaign/lr-1",  # other scheme, other origin
        "https://campaigns.example.com:8443/v2/send-campaign/lr-1",
        "https://user:pw@campaigns.example.com/v2/send-campaign/lr-1",
        "https://campaigns.example.com.evil.io/v2/send-campaign/lr-1",
        "ftp://campaigns.example.com/v2/send-campaign/lr-1",
        "/v2/send-campaign/lr 1",
        "/v2/send-campaign\\lr-1",
    ],
)
async def test_foreign_status_url_is_refused_before_any_request(
    client: CampaignClient, mocked: ScriptedExchange, status_url: str
) -> None:
    mocked.get(re.compile(".*"), payload=answer("DONE"), repeat=True)
    ack = CampaignAck("queued", "12", "b-1", "lr-1", status_url)
    with pytest.raises(CampaignKitError, match="status_url"):
        client.track(ack)
    assert mocked.requests == []


async def test_status_url_forms_and_path_prefix(fake: FakeTime, mocked: ScriptedExchange) -> None:
    prefixed = "http://host.example.com/campaign"
    async with CampaignClient(
        KEY, campaign_url=prefixed, sleep=fake.sleep, exchange=mocked
    ) as client:
        url = f"{prefixed}/v2/send-campaign/L1"
        same_origin = "http://HOST.example.com:80/campaign/v2/send-campaign/L1"
        targets = [
            (CampaignAck("q", "1", "b", "L1", "/v2/send-campaign/L1"), url),
            ("/v2/send-campaign/L1", url),
            ("v2/send-campaign/L1", url),
            ("L1", url),
            (same_origin, same_origin),
        ]
        for target, expected in targets:
            tracker = client.track(target, clock=fake.clock)
            assert tracker.launch_request_id == "L1"
            assert tracker._request.url == expected
        url = f"{prefixed}/v2/send-campaign/L1"
        mocked.get(url, payload=answer("DONE", dep(1, "DELIVERED"), launch="L1"))
        changes = await collect(client.track("L1", clock=fake.clock))
        assert [c.launch_request_id for c in changes] == ["L1"]
        (requested,) = mocked.requests
        assert requested.url == url
        assert requested.endpoint.method == "GET"
        assert requested.headers["Authorization"] == KEY
        # A launch id needing encoding stays one path segment.
        assert client.track("a b?c", clock=fake.clock)._request.url.endswith(
            "/v2/send-campaign/a%20b%3Fc"
        )


async def test_invalid_options_are_validation_errors(client: CampaignClient) -> None:
    for options in (
        {"until": "forever"},
        {"poll_interval": 0},
        {"timeout": -1},
        {"not_found_grace": -1},
    ):
        with pytest.raises(CampaignKitError):
            client.track(ACK, **options)
    with pytest.raises(CampaignKitError):
        client.track(123)  # type: ignore[arg-type]


# -- modes, checkpoint, lifecycle -------------------------------------------------------


async def test_until_settled_goes_past_done_until_nothing_is_in_progress(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(
        mocked,
        answer("DONE", dep(1, "RECEIVED"), dep(2, "SUCCESS")),
        answer("DONE", dep(1, "RETRY"), dep(2, "SUCCESS")),
        answer("DONE", dep(1, "FAILURE"), dep(2, "SUCCESS")),
        answer("DONE", dep(1, "FAILURE"), dep(2, "DELIVERED")),  # never read
    )
    tracker = client.track(ACK, clock=fake.clock, until="settled")
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
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(mocked, answer("DONE", dep(1, "RECEIVED")), answer("DONE", dep(1, "DELIVERED")))
    tracker = client.track(ACK, clock=fake.clock)
    assert triples(await collect(tracker)) == [("c1", None, "RECEIVED")]
    assert requests_to(mocked) == 1


async def test_until_settled_times_out_on_stuck_deployments(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    mocked.get(URL, payload=answer("DONE", dep(1, "RECEIVED"), dep(2, "DELIVERED")), repeat=True)
    tracker = client.track(ACK, clock=fake.clock, until="settled", timeout=60)
    with pytest.raises(TimeoutError) as info:
        await collect(tracker)
    assert info.value.last_status is not None
    assert tracker.counts == Counter({S.RECEIVED: 1, S.DELIVERED: 1})
    assert tracker.progress == Progress(done=1, total=2, failed=0, delivered=1)


async def test_checkpoint_resume_in_a_new_client_never_reyields(
    mocked: ScriptedExchange, fake: FakeTime
) -> None:
    script(
        mocked,
        answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "RECEIVED"), dep(3, None)),
        answer("CLAIMED", dep(1, "SUCCESS"), dep(2, "SUCCESS"), dep(3, "RECEIVED")),
    )
    async with CampaignClient(
        KEY, campaign_url=CAMPAIGN, sleep=fake.sleep, exchange=mocked
    ) as first:
        tracker = first.track(ACK, clock=fake.clock)
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
    async with CampaignClient(
        KEY, campaign_url=CAMPAIGN, sleep=fake.sleep, exchange=service
    ) as second:
        resumed = second.track(ACK.status_url, resume=checkpoint, clock=fake.clock)
        assert resumed.counts == Counter({S.SUCCESS: 1, S.RECEIVED: 1, None: 1})
        rest = await collect(resumed)
    assert triples(rest) == [
        ("c2", "RECEIVED", "SUCCESS"),
        ("c3", None, "RECEIVED"),
        ("c1", "SUCCESS", "DELIVERED"),
    ]
    # Every transition exactly once over both trackers.
    assert len(set(triples(got + rest))) == len(got + rest) == 6


async def test_resume_refuses_another_launchs_checkpoint(client: CampaignClient) -> None:
    checkpoint = {
        "version": 1,
        "launch_request_id": "other",
        "status_url": "other",
        "state": None,
        "statuses": {},
    }
    with pytest.raises(CampaignKitError, match="other"):
        client.track(ACK, resume=checkpoint)
    with pytest.raises(CampaignKitError):
        client.track(ACK, resume={"version": 99})


async def test_early_break_and_aclose_leave_no_task(
    client: CampaignClient, mocked: ScriptedExchange, fake: FakeTime
) -> None:
    mocked.get(URL, payload=answer("CLAIMED", dep(1, "RECEIVED"), dep(2, "RECEIVED")), repeat=True)
    tracker = client.track(ACK, clock=fake.clock)
    async for _ in tracker:
        break
    assert asyncio.all_tasks() == {asyncio.current_task()}
    await tracker.aclose()
    await tracker.aclose()
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert await collect(tracker) == []
    async with client.track(ACK, clock=fake.clock) as other:
        await anext(other)
    assert other.finished
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_the_view_diffs_bytes_without_io() -> None:
    view = View("lr-1")
    first = answer("CLAIMED", *[dep(i, "RECEIVED") for i in range(10)])
    assert len(view.apply(decode(first), _now())) == 10
    second = answer("CLAIMED", *[dep(i, "RECEIVED") for i in range(10)])
    second["deployments"][4]["status"] = "SUCCESS"
    changes = view.apply(decode(second), _now())
    assert [(key, c.previous, c.current) for key, c in changes] == [("c4", S.RECEIVED, S.SUCCESS)]
    assert view.apply(decode(second), _now()) == []


def decode(data: dict[str, Any]) -> Any:
    return decoder(StatusAnswer)(json.dumps(data).encode(), 200, {})


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


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


# -- against a real local server: cancellation, connections, track_many ----------------


def leftover_tasks() -> set[asyncio.Task[Any]]:
    """Running tasks other than this test's, ignoring the local server's own
    request handlers (they live in the same loop)."""
    return {
        task
        for task in asyncio.all_tasks()
        if task is not asyncio.current_task()
        and not task.get_coro().__qualname__.startswith("RequestHandler.")  # type: ignore[union-attr]
    }


class StatusServer:
    """Serves scripted campaign statuses per launch, counts concurrency."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.polls: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.scripts: dict[str, list[dict[str, Any]]] = {}

    async def handle(self, request: web.Request) -> web.Response:
        launch = request.match_info["launch"]
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        script = self.scripts.get(launch)
        if script is None:
            return web.json_response({"detail": "not found"}, status=404)
        index = min(self.polls[launch], len(script) - 1)
        self.polls[launch] += 1
        return web.json_response(script[index])


@pytest.fixture
async def server() -> AsyncIterator[tuple[StatusServer, str]]:
    state = StatusServer()
    app = web.Application()
    app.router.add_get("/prefix/v2/send-campaign/{launch}", state.handle)
    async with serving(app) as url:
        yield state, f"{url}/prefix"


async def test_cancelling_the_consumer_mid_request_leaves_no_task_and_no_connection(
    server: tuple[StatusServer, str],
) -> None:
    state, url = server
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
    server: tuple[StatusServer, str],
) -> None:
    state, url = server
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


async def test_track_many_merges_launches_tags_changes_and_bounds_concurrency(
    server: tuple[StatusServer, str],
) -> None:
    state, url = server
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
    assert group.progress == Progress(done=6, total=6, failed=3, delivered=3)
    assert all(tracker.finished for tracker in group.trackers.values())


async def test_track_many_early_break_checkpoint_and_resume(
    server: tuple[StatusServer, str],
) -> None:
    state, url = server
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
    server: tuple[StatusServer, str],
) -> None:
    state, url = server
    state.scripts["lr-ok"] = [answer("CLAIMED", dep(1, "RECEIVED"), launch="lr-ok")]
    async with CampaignClient(KEY, campaign_url=url) as client:
        group = client.track_many(["lr-ok", "lr-missing"], poll_interval=0.01, not_found_grace=0)
        with pytest.raises(NotFoundError):
            await asyncio.wait_for(collect(group), 5)
        assert leftover_tasks() == set()


def test_tracker_is_exported() -> None:
    assert CampaignTracker.__name__ == "CampaignTracker"
    change = DeploymentChange(
        Deployment("c", "s", "1", None, None, S.SUCCESS), None, S.SUCCESS, _now(), "lr"
    )
    with pytest.raises(AttributeError):
        change.current = S.DELIVERED  # type: ignore[misc]
    assert not hasattr(change, "__dict__")
