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

KEY = "sk_test_sync_0123456789"
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
        CampaignClient(KEY, base_url=BASE, untill="done")
    with pytest.raises(CampaignKitError, match="API key"):
        CampaignClient("", base_url=BASE)
    assert sync_threads() == []


async def test_against_the_sandbox_send_track_page_and_raw_answers(sb: Sandbox) -> None:
    urls = {"base_url": sb.base_url, "campaign_url": sb.campaign_url, "agent_url": sb.agent_url}

    def script() -> tuple[int, list[str], int, str]:
        with CampaignClient(sb.api_key, **urls) as client:
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
