"""webhook_app over real HTTP: the published bodies answered 200 with the
callback's keys, repeats and bad input refused before anything is stored."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
import pytest
from helpers import webhook_samples as samples
from helpers.ledgers import NewLedger
from webhooks.receivers import ALL_SAMPLES, Calls, CountingStore, Recorder, Updates

from campaignkit import SessionKey, ValidationError
from campaignkit.webhooks import (
    EVENTS_NAMESPACE,
    EventKind,
    WebhookEvent,
    webhook_app,
    webhook_handler,
)


async def test_a_response_is_answered_with_the_callbacks_keys(serve: Any) -> None:
    calls = Calls({"server_user_valid": "yes"})
    client = await serve(webhook_app(calls))
    response = await client.post("/webhook", json=samples.RESPONSE)
    assert response.status == 200
    assert await response.json() == {
        "user_session_keys": [{"key": "server_user_valid", "value": "yes"}]
    }
    [event] = calls.events
    assert (event.kind, event.session_id, event.answer) == (
        EventKind.RESPONSE,
        "1234",
        "Si necesito",
    )


@pytest.mark.parametrize("wait", [None, 0.0, 0.05])
async def test_sync_eager_and_waiting_callbacks_answer_alike(
    serve: Any, wait: float | None
) -> None:
    seen: list[str | None] = []

    def sync(event: WebhookEvent) -> dict[str, str]:
        seen.append(event.session_id)
        return {"n": str(len(seen))}

    async def waiting(event: WebhookEvent) -> dict[str, str]:
        assert wait is not None
        await asyncio.sleep(wait)
        return sync(event)

    client = await serve(webhook_app(sync if wait is None else waiting))
    for body in (samples.RESPONSE, samples.DELIVERED):
        answer = await (await client.post("/webhook", json=body)).json()
        assert answer == {"user_session_keys": [{"key": "n", "value": str(len(seen))}]}
    assert seen == ["1234", "1234"]


async def test_a_waiting_callback_that_fails_answers_empty(serve: Any) -> None:
    async def failing(event: WebhookEvent) -> None:
        await asyncio.sleep(0.01)
        raise RuntimeError("late boom")

    client = await serve(webhook_app(failing))
    answer = await client.post("/webhook", json=samples.RESPONSE)
    assert (answer.status, await answer.json()) == (200, {"user_session_keys": []})


async def test_asyncio_timeout_inside_on_event_times_out_on_event_only(serve: Any) -> None:
    outcomes: list[str] = []

    async def bounded(event: WebhookEvent) -> dict[str, str]:
        try:
            async with asyncio.timeout(0.05):
                await asyncio.sleep(1)
        except TimeoutError:
            outcomes.append("timed out")
        return {"checked": "late"}

    client = await serve(webhook_app(bounded))
    answer = await client.post("/webhook", json=samples.RESPONSE)
    assert (answer.status, await answer.json()) == (
        200,
        {"user_session_keys": [{"key": "checked", "value": "late"}]},
    )
    assert outcomes == ["timed out"]


async def test_session_key_answers_keep_their_type(serve: Any) -> None:
    where = SessionKey("where", '{"latitude": 1, "longitude": 2}', "location")
    client = await serve(webhook_app(Calls([where, SessionKey("a", "b")])))
    answer = await (await client.post("/webhook", json=samples.RESPONSE)).json()
    assert answer["user_session_keys"] == [
        {"key": "where", "value": where.value, "type": "location"},
        {"key": "a", "value": "b"},
    ]


async def test_every_published_kind_is_passed_once(serve: Any) -> None:
    calls = Calls()
    client = await serve(webhook_app(calls))
    for body in ALL_SAMPLES + ALL_SAMPLES:
        response = await client.post("/webhook", json=body)
        assert response.status == 200
        assert await response.json() == {"user_session_keys": []}
    assert [e.kind for e in calls.events] == [
        EventKind.RESPONSE,
        EventKind.DELIVERED,
        EventKind.READ,
        EventKind.OPT_OUT,
        EventKind.TIMEOUT,
        EventKind.CONDITION,
        EventKind.CONVERSATION_CLOSED,
        EventKind.CONVERSATION_CLOSED,  # the HubSpot variant
        EventKind.TEMPLATE_STATUS,
        EventKind.UNKNOWN,
    ]


async def test_different_answers_of_one_session_are_different_events(serve: Any) -> None:
    calls = Calls()
    client = await serve(webhook_app(calls))
    second = {**samples.RESPONSE, "actual_response": "No", "responded_at": "2019-01-01 00:01:00"}
    reordered = dict(reversed(list(samples.RESPONSE.items())))
    for body in (samples.RESPONSE, second, reordered):
        assert (await client.post("/webhook", json=body)).status == 200
    assert [e.answer for e in calls.events] == ["Si necesito", "No"]


async def test_kinds_filters(serve: Any) -> None:
    calls, recorder = Calls({"x": "y"}), Recorder()
    client = await serve(webhook_app(calls, kinds={EventKind.RESPONSE}, ledger=recorder))
    delivered = await client.post("/webhook", json=samples.DELIVERED)
    assert await delivered.json() == {"user_session_keys": []}
    assert (await client.post("/webhook", json=samples.RESPONSE)).status == 200
    assert [e.kind for e in calls.events] == [EventKind.RESPONSE]
    assert recorder.events == calls.events  # the ledger sees the passed kinds only


async def test_the_secret_is_the_whole_header_value(serve: Any) -> None:
    calls = Calls()
    app = webhook_app(calls, secret="Bearer s3cret", secret_header="Authorization")
    client = await serve(app)
    for headers in ({}, {"Authorization": "s3cret"}, {"Authorization": "Bearer s3cre"}):
        response = await client.post("/webhook", json=samples.READ, headers=headers)
        assert response.status == 401
    ok = await client.post(
        "/webhook", json=samples.READ, headers={"Authorization": "Bearer s3cret"}
    )
    assert ok.status == 200
    assert len(calls.events) == 1


def _deep(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


BAD = [
    pytest.param(b"{not json", 400, id="not-json"),
    pytest.param(orjson.dumps([samples.READ]), 400, id="array"),
    pytest.param(b'{"session_id": "' + b"x" * (2 * 1024 * 1024) + b'"}', 413, id="2MiB"),
    pytest.param(_deep(10_000), 400, id="10000-deep"),
    pytest.param(_deep(300), 400, id="300-deep"),  # orjson reads it, does not write it
    pytest.param(orjson.dumps({**samples.READ, "session_id": "12\x0034"}), 422, id="nul-id"),
    pytest.param(orjson.dumps({**samples.READ, "session_id": "1\nFAKE log"}), 422, id="newline-id"),
    # Line separators, C1 controls (NEL, CSI) and bidi overrides forge or hide log lines too.
    *(
        pytest.param(orjson.dumps({**samples.READ, "session_id": f"1{c}FAKE"}), 422, id=name)
        for c, name in [("\u2028", "u2028-id"), ("\x85", "nel-id"), ("\x9b", "csi-id")]
    ),
    pytest.param(orjson.dumps({**samples.READ, "conversation_id": "c\u202e1"}), 422, id="bidi"),
    pytest.param(orjson.dumps({**samples.READ, "session_id": "9" * 300}), 422, id="long-id"),
    pytest.param(orjson.dumps({**samples.READ, "cellphone": "1\r2"}), 422, id="cr-phone"),
    pytest.param(
        orjson.dumps({**samples.READ, "user_session_keys": [{"key": "k", "value": "\x00"}]}),
        422,
        id="nul-value",
    ),
    pytest.param(orjson.dumps({"read_at": "2019-01-01 00:00:00"}), 422, id="no-id"),
    pytest.param(orjson.dumps({"closed_at": "2019-01-03 10:00:00"}), 422, id="hubspot-no-id"),
    pytest.param(
        orjson.dumps({**samples.RESPONSE, "actual_response": "FAKE\x00"}), 422, id="nul-answer"
    ),
    pytest.param(
        orjson.dumps({**samples.RESPONSE, "actual_response": "x" * 70_000}), 422, id="long-answer"
    ),
]


@pytest.mark.parametrize(("body", "status"), BAD)
async def test_bad_input_is_refused_before_anything_is_stored(
    serve: Any, caplog: pytest.LogCaptureFixture, body: bytes, status: int
) -> None:
    calls, store = Calls(), CountingStore()
    client = await serve(webhook_app(calls, dedupe=store))
    caplog.set_level(logging.DEBUG, "campaignkit")
    response = await client.post(
        "/webhook", data=body, headers={"Content-Type": "application/json"}
    )
    assert response.status == status
    assert sorted(await response.json()) == ["error", "message"]
    assert calls.events == []
    assert store.seen == {}
    [line] = [r.getMessage() for r in caplog.records if r.name == "campaignkit.webhooks"]
    for raw in ("\x00", "\n", "FAKE", "xxxx", "9999"):
        assert raw not in line


async def test_a_wrong_secret_is_refused_before_anything_is_stored(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    calls, store = Calls(), CountingStore()
    app = webhook_app(calls, dedupe=store, secret="Bearer s3cret", secret_header="Authorization")
    client = await serve(app)
    caplog.set_level(logging.DEBUG, "campaignkit")
    wrong = {"Authorization": "Bearer FAKE-guess"}
    response = await client.post("/webhook", json=samples.RESPONSE, headers=wrong)
    assert (response.status, (await response.json())["error"]) == (401, "unauthorized")
    assert (calls.events, store.seen) == ([], {})
    [line] = [r.getMessage() for r in caplog.records if r.name == "campaignkit.webhooks"]
    assert "FAKE" not in line
    assert "s3cret" not in line


async def test_a_failing_callback_answers_empty_and_is_handled_again(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls(RuntimeError("boom"))
    client = await serve(webhook_app(calls))
    for _ in range(2):
        response = await client.post("/webhook", json=samples.RESPONSE)
        assert (response.status, await response.json()) == (200, {"user_session_keys": []})
    assert len(calls.events) == 2
    assert any("on_event failed" in r.getMessage() for r in caplog.records)
    # Keys that cannot go on the wire fail like an exception (they were a 500).
    for wrong in ("not keys", {"a": "\ud800"}, [SessionKey("a", "b", 5)]):  # type: ignore[arg-type]
        calls.answer = wrong
        response = await client.post("/webhook", json=samples.RESPONSE)
        assert (response.status, await response.json()) == (200, {"user_session_keys": []})
    assert len(calls.events) == 5


async def test_a_slow_callback_is_answered_at_the_deadline_and_updates_later(
    serve: Any,
) -> None:
    updates = Updates()
    calls = Calls({"late": "yes"}, delay=0.5)
    client = await serve(webhook_app(calls, deadline=0.1, client=updates))
    started = time.monotonic()
    response = await client.post("/webhook", json=samples.RESPONSE)
    assert await response.json() == {"user_session_keys": []}
    assert time.monotonic() - started < 0.45
    await updates.wait(1)
    assert updates.calls == [("1234", (SessionKey("late", "yes"),))]


@pytest.mark.parametrize(
    ("body", "with_client", "reason"),
    [
        (samples.TEMPLATE_STATUS, True, "no session id to send them to"),
        (samples.RESPONSE, False, "no client= to send them"),
    ],
)
async def test_late_keys_that_cannot_be_sent_are_logged_with_the_reason(
    serve: Any,
    caplog: pytest.LogCaptureFixture,
    body: dict[str, Any],
    with_client: bool,
    reason: str,
) -> None:
    caplog.set_level(logging.WARNING, "campaignkit.webhooks")
    updates = Updates()
    calls = Calls({"late": "yes"}, delay=0.2)
    app = webhook_app(calls, deadline=0.05, client=updates if with_client else None)
    client = await serve(app)
    await client.post("/webhook", json=body)
    for _ in range(100):
        if "late key dropped" in caplog.text:
            break
        await asyncio.sleep(0.02)
    assert f"1 late key dropped: {reason}" in caplog.text
    assert updates.calls == []


async def test_a_blocking_plain_function_is_answered_at_the_deadline_too(serve: Any) -> None:
    updates = Updates()

    def blocking(event: WebhookEvent) -> dict[str, str]:
        time.sleep(0.5)  # in a worker thread: the loop goes on serving
        return {"late": event.kind.value}

    client = await serve(webhook_app(blocking, deadline=0.1, client=updates))
    started = time.monotonic()
    answers = await asyncio.gather(
        client.post("/webhook", json=samples.RESPONSE), client.post("/webhook", json=samples.READ)
    )
    assert time.monotonic() - started < 0.45
    assert [await a.json() for a in answers] == [{"user_session_keys": []}] * 2
    await updates.wait(2)
    assert set(updates.calls) == {
        ("1234", (SessionKey("late", "read"),)),
        ("1234", (SessionKey("late", "response"),)),
    }


async def test_a_plain_function_returning_a_coroutine_is_awaited(serve: Any) -> None:
    calls = Calls({"via": "lambda"})
    client = await serve(webhook_app(lambda event: calls(event)))
    answer = await client.post("/webhook", json=samples.RESPONSE)
    assert await answer.json() == {"user_session_keys": [{"key": "via", "value": "lambda"}]}


async def test_the_ledger_records_each_event(serve: Any) -> None:
    recorder = Recorder()
    client = await serve(webhook_app(Calls(), ledger=recorder))
    for body in (samples.DELIVERED, samples.READ, samples.READ):
        await client.post("/webhook", json=body)
    assert [e.kind for e in recorder.events] == [EventKind.DELIVERED, EventKind.READ]


async def test_a_failing_store_is_503_and_the_callback_not_called(serve: Any) -> None:
    calls = Calls()
    client = await serve(webhook_app(calls, dedupe=CountingStore(fail=True)))
    response = await client.post("/webhook", json=samples.READ)
    assert response.status == 503
    assert calls.events == []


async def test_records_expire_after_the_retention(serve: Any) -> None:
    store = CountingStore()
    calls = Calls()
    client = await serve(webhook_app(calls, dedupe=store, retention=0.2))
    await client.post("/webhook", json=samples.READ)
    await asyncio.sleep(0.3)
    await client.post("/webhook", json=samples.DELIVERED)
    assert len(store.seen) == 1  # the READ record was pruned
    await client.post("/webhook", json=samples.READ)
    read, delivered = EventKind.READ, EventKind.DELIVERED
    assert [e.kind for e in calls.events] == [read, delivered, read]


async def test_a_store_without_pruning_still_dedupes(serve: Any) -> None:
    class OldStore:  # a DedupeStore of an earlier release: no prune_seen
        def __init__(self) -> None:
            self.seen: set[str] = set()

        async def first_sighting(self, namespace: str, key: str) -> bool:
            fresh = key not in self.seen
            self.seen.add(key)
            return fresh

        async def forget(self, namespace: str, key: str) -> None:
            self.seen.discard(key)

    calls = Calls()
    client = await serve(webhook_app(calls, dedupe=OldStore()))
    for _ in range(2):
        assert (await client.post("/webhook", json=samples.READ)).status == 200
    assert len(calls.events) == 1


def test_bad_options() -> None:
    with pytest.raises(ValidationError) as raised:
        webhook_handler(Calls(), deadline=10, secret="", retention=0, kinds={"response"})  # type: ignore[arg-type]
    assert {p for p, _ in raised.value.problems} == {"deadline", "secret", "retention", "kinds"}


# -- on the real stores ------------------------------------------------------


async def test_a_ledger_store_refuses_a_nul_id_and_dedupes_replicas(
    serve: Any, new_ledger: NewLedger
) -> None:
    calls = Calls()
    async with new_ledger() as ledger, new_ledger() as replica:
        first = await serve(webhook_app(calls, dedupe=ledger))
        second = await serve(webhook_app(calls, dedupe=replica))
        nul = {**samples.RESPONSE, "session_id": "1\x002"}
        for _ in range(3):
            assert (await first.post("/webhook", json=nul)).status == 422
        assert (await first.post("/webhook", json=samples.RESPONSE)).status == 200
        assert (await second.post("/webhook", json=samples.RESPONSE)).status == 200
        assert (await second.post("/webhook", json=samples.READ)).status == 200
        assert [e.kind for e in calls.events] == [EventKind.RESPONSE, EventKind.READ]
        assert await ledger.prune_seen(EVENTS_NAMESPACE, time.time() + 1) == 2
        assert await ledger.first_sighting(EVENTS_NAMESPACE, "k")
