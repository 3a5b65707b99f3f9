"""campaignkit.sync.CampaignClient: the same calls, blocking, on a loop of its
own; inside a running loop (as in Jupyter), against the sandbox over real
HTTP, and closed cleanly."""

from __future__ import annotations

import asyncio
import threading

import pytest
from helpers.tracking import answer, dep

from campaignkit import CampaignKitError, NotFoundError, User, ValidationError
from campaignkit.sandbox import Sandbox
from campaignkit.sync import CampaignClient
from campaignkit.testing import Answer, FakeTime, MockExchange

KEY = "sk_tst_sync_0123456789"
BASE = "https://main.test"
POLLS = [{"id": 1, "name": "One"}]
ANA = User(country_code="+57", cellphone="3001234567")


def sync_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "campaignkit-sync"]


async def test_it_works_inside_a_running_loop_and_raises_the_same_errors() -> None:
    exchange = MockExchange({"GET /poll/api/all": Answer.json(POLLS)})
    assert asyncio.get_running_loop()  # as in a notebook cell
    with CampaignClient(KEY, base_url=BASE, exchange=exchange) as client:
        assert [poll.name for poll in client.list_polls()] == ["One"]
        with pytest.raises(NotFoundError):
            client.get_session_history("s-1")
        with pytest.raises(ValidationError, match="poll_id"):
            client.send_campaign("..", [ANA])
        assert KEY not in repr(client)
    assert exchange.closed
    assert sync_threads() == []


def test_close_is_idempotent_and_a_closed_client_refuses_calls() -> None:
    client = CampaignClient(KEY, base_url=BASE, exchange=MockExchange({}))
    client.close()
    client.close()
    with pytest.raises(CampaignKitError, match="closed"):
        client.list_polls()
    assert sync_threads() == []


def test_the_settings_are_those_of_the_async_client() -> None:
    with pytest.raises(TypeError):
        CampaignClient(KEY, base_url=BASE, untill="done")  # type: ignore[call-arg]
    with pytest.raises(CampaignKitError, match="API key"):
        CampaignClient("", base_url=BASE)
    assert sync_threads() == []


async def test_against_the_sandbox_send_track_page_and_raw_answers(sb: Sandbox) -> None:
    def script() -> tuple[int, list[str], int, str]:
        with CampaignClient(
            sb.api_key, base_url=sb.base_url, campaign_url=sb.campaign_url, agent_url=sb.agent_url
        ) as client:
            with client.raw_answers() as answers:
                ack = client.send_campaign(1001, [ANA])
            tracker = client.track(ack, poll_interval=0.05, until="settled", timeout=30)
            changes = [change.current.value for change in tracker]
            assert tracker.state is not None
            sessions = sum(1 for _ in client.iter_sessions(1001, page_size=1))
            return answers[0].status, changes, sessions, tracker.state.value

    # The sandbox serves from this loop: the blocking script runs in a thread.
    status, changes, sessions, state = await asyncio.wait_for(asyncio.to_thread(script), 60)
    assert status == 202
    assert changes[-1] in {"SUCCESS", "DELIVERED"}  # out of progress: settled
    assert sessions >= 1
    assert state == "DONE"
    assert sync_threads() == []


def test_breaking_out_of_tracking_closes_the_tracker() -> None:
    running = answer("CLAIMED", dep(1, "RECEIVED"), dep(2, None))
    exchange = MockExchange({"GET /v2/send-campaign/lr-1": Answer.json(running)})
    with CampaignClient(KEY, campaign_url=BASE, exchange=exchange) as client:
        tracker = client.track("lr-1", poll_interval=0.01)
        for change in tracker:
            assert change.current.value == "RECEIVED"
            break
        assert tracker.aio.finished  # closed by the break, nothing left polling
        assert len(exchange.requests) == 1
    assert sync_threads() == []


def test_fake_time_and_the_fake_exchange_serve_the_blocking_client_too() -> None:
    replies = [Answer.json({}, status=503), Answer.json(POLLS)]
    exchange = MockExchange({"GET /poll/api/all": replies})
    time = FakeTime()
    client = time.install(CampaignClient(KEY, base_url=BASE, exchange=exchange))
    with client, client.raw_answers() as answers:
        assert [poll.id for poll in client.list_polls()] == [1]
    assert [a.status for a in answers] == [503, 200]
    assert len(time.sleeps) == 1


def test_track_many_and_updates_without_await() -> None:
    done = {
        launch: Answer.json(answer("DONE", dep(i, "DELIVERED"), launch=launch))
        for i, launch in ((1, "lr-1"), (2, "lr-2"))
    }
    exchange = MockExchange({f"GET /v2/send-campaign/{k}": v for k, v in done.items()})
    with CampaignClient(KEY, campaign_url=BASE, exchange=exchange) as client:
        group = client.track_many(["lr-1", "lr-2"], poll_interval=0.01)
        changes = sorted((c.launch_request_id, c.current.value) for c in group)
        assert changes == [("lr-1", "DELIVERED"), ("lr-2", "DELIVERED")]
        assert group.progress.done == 2
        updates = list(client.track("lr-1", poll_interval=0.01).updates(every=0.01))
        assert updates[-1].finished
    assert sync_threads() == []


def test_with_options_shares_the_thread_and_closing_the_copy_leaves_it() -> None:
    replies = [Answer.json({}, status=503), Answer.json({}, status=503), Answer.json(POLLS)]
    exchange = MockExchange({"GET /poll/api/all": replies})
    time = FakeTime()
    client = time.install(CampaignClient(KEY, base_url=BASE, exchange=exchange))
    with client:
        quick = client.with_options(max_retries=0, extra_headers={"X-Team": "ops"})
        with pytest.raises(CampaignKitError, match="503"):
            quick.list_polls()
        assert exchange.requests[-1].headers["X-Team"] == "ops"
        assert time.sleeps == []
        quick.close()
        assert sync_threads() != []
        assert [poll.id for poll in client.list_polls()] == [1]
        assert len(time.sleeps) == 1  # the client's own retries, on the fake time
        assert "X-Team" not in exchange.requests[-1].headers
        assert client.config.retry.max_retries == 2
        assert KEY not in repr(quick)
        with pytest.raises(ValidationError, match="timeout"):
            client.with_options(timeout=-1)
    assert exchange.closed
    assert sync_threads() == []
    with pytest.raises(CampaignKitError, match="closed"):
        quick.list_polls()
