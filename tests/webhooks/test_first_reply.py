"""campaignkit.webhooks: the first-reply webhook handler over HTTP, duplicates
detected in memory or through a ledger."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from helpers import webhook_samples as samples
from helpers.ledgers import NewLedger, journal_of
from helpers.servers import serving

from campaignkit import User, ValidationError
from campaignkit.sandbox import Sandbox
from campaignkit.webhooks import (
    DEFAULT_SECRET_HEADER,
    WEBHOOK_HANDLER,
    ReplyEvent,
    extract_reply,
    first_reply_app,
    first_reply_handler,
)

Client = TestClient[web.Request, web.Application]


class Recorder:
    def __init__(self) -> None:
        self.events: list[ReplyEvent] = []
        self.got = asyncio.Event()

    async def __call__(self, event: ReplyEvent) -> None:
        self.events.append(event)
        self.got.set()


async def test_accepts_and_calls_on_reply(serve: Any) -> None:
    recorder = Recorder()
    client = await serve(first_reply_app(recorder))
    body = {"session_external_id": "s-1", "user_session_keys": [{"key": "k", "value": "v"}]}
    response = await client.post("/webhook", json=body)
    assert response.status == 202
    assert await response.json() == {"status": "accepted", "session_external_id": "s-1"}
    await asyncio.wait_for(recorder.got.wait(), 5)
    assert recorder.events[0].keys == {"k": "v"}
    assert recorder.events[0].payload == body


async def test_custom_path_and_only_post(serve: Any) -> None:
    client = await serve(first_reply_app(Recorder(), path="/hooks/reply"))
    assert (await client.post("/webhook", json={"session_external_id": "a"})).status == 404
    assert (await client.get("/hooks/reply")).status == 405
    assert (await client.post("/hooks/reply", json={"session_external_id": "a"})).status == 202


@pytest.mark.parametrize("body", [b"", b"{not json", b"\xff\xfe", b'{"session_external_id": "a"'])
async def test_bad_json_is_400(serve: Any, body: bytes) -> None:
    recorder = Recorder()
    client = await serve(first_reply_app(recorder))
    response = await client.post(
        "/webhook", data=body, headers={"Content-Type": "application/json"}
    )
    assert response.status == 400
    assert (await response.json())["error"] == "bad_json"
    assert recorder.events == []


@pytest.mark.parametrize(
    "body",
    [{}, {"session_external_id": ""}, {"session": {"id": "x"}}, [{"session_external_id": "a"}]],
)
async def test_missing_id_is_422(serve: Any, body: Any) -> None:
    recorder = Recorder()
    client = await serve(first_reply_app(recorder))
    response = await client.post("/webhook", json=body)
    assert response.status == 422
    answer = await response.json()
    assert answer["error"] == "no_session_external_id"
    assert answer["message"].startswith(("session_external_id: ", "$: "))
    assert recorder.events == []


async def test_body_over_limit_is_413(serve: Any) -> None:
    recorder = Recorder()
    client = await serve(first_reply_app(recorder, max_body=100))
    small = {"session_external_id": "s", "pad": "x" * 40}
    big = {"session_external_id": "s", "pad": "x" * 200}
    assert (await client.post("/webhook", json=big)).status == 413

    async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
        for _ in range(10):
            yield b" " * 50

    response = await client.post("/webhook", data=chunked())
    assert response.status == 413
    assert (await client.post("/webhook", json=small)).status == 202


async def test_default_limit_is_one_mebibyte(serve: Any) -> None:
    client = await serve(first_reply_app(Recorder()))
    body = orjson.dumps({"session_external_id": "s", "pad": "x" * (1024 * 1024)})
    response = await client.post("/webhook", data=body)
    assert response.status == 413


async def test_secret(serve: Any) -> None:
    recorder = Recorder()
    client = await serve(first_reply_app(recorder, secret="s3cret"))
    body = {"session_external_id": "s-1"}
    assert (await client.post("/webhook", json=body)).status == 401
    wrong = {DEFAULT_SECRET_HEADER: "s3cre"}
    response = await client.post("/webhook", json=body, headers=wrong)
    assert response.status == 401
    assert (await response.json())["error"] == "unauthorized"
    assert recorder.events == []
    ok = {DEFAULT_SECRET_HEADER: "s3cret"}
    assert (await client.post("/webhook", json=body, headers=ok)).status == 202


async def test_secret_checked_before_the_body(serve: Any) -> None:
    client = await serve(first_reply_app(Recorder(), secret="k", max_body=10))
    response = await client.post("/webhook", data=b"x" * 100)
    assert response.status == 401


async def test_secret_header_and_query_overridable(serve: Any) -> None:
    app = first_reply_app(Recorder(), secret="tok", secret_header="X-Token", secret_query="token")
    client = await serve(app)
    body = {"session_external_id": "s-1"}
    assert (
        await client.post("/webhook", json=body, headers={DEFAULT_SECRET_HEADER: "tok"})
    ).status == 401
    assert (await client.post("/webhook", json=body, headers={"X-Token": "tok"})).status == 202
    body = {"session_external_id": "s-2"}
    assert (await client.post("/webhook?token=nope", json=body)).status == 401
    assert (await client.post("/webhook?token=tok", json=body)).status == 202


@pytest.mark.parametrize(
    ("options", "paths"),
    [
        ({"secret": ""}, ["secret"]),
        ({"max_body": 0}, ["max_body"]),
        ({"dedupe_size": -1}, ["dedupe_size"]),
        ({"max_body": 0, "dedupe_size": -1, "secret": ""}, ["max_body", "dedupe_size", "secret"]),
    ],
)
def test_option_mistakes_are_validation_errors(options: dict[str, Any], paths: list[str]) -> None:
    with pytest.raises(ValidationError) as raised:
        first_reply_app(Recorder(), **options)
    assert [p for p, _ in raised.value.problems] == paths


async def test_duplicate_delivery_ignored(serve: Any) -> None:
    recorder = Recorder()
    app = first_reply_app(recorder)
    client = await serve(app)
    body = {"session_external_id": "dup"}
    assert (await client.post("/webhook", json=body)).status == 202
    second = await client.post("/webhook", json={"data": body})
    assert second.status == 200
    assert (await second.json())["status"] == "duplicate"
    await app[WEBHOOK_HANDLER].drain(5)
    assert [e.session_external_id for e in recorder.events] == ["dup"]
    assert app[WEBHOOK_HANDLER].received == 1


async def test_duplicate_window_is_bounded_lru(serve: Any) -> None:
    recorder = Recorder()
    app = first_reply_app(recorder, dedupe_size=2)
    client = await serve(app)
    for sid in ["a", "b", "a", "c", "b", "a"]:
        await client.post("/webhook", json={"session_external_id": sid})
    await app[WEBHOOK_HANDLER].drain(5)
    # "a" was refreshed by its duplicate, so "b" was evicted by "c"; then "b"
    # evicts "a" and the last "a" is new again.
    assert [e.session_external_id for e in recorder.events] == ["a", "b", "c", "b", "a"]


async def test_failed_on_reply_lets_a_redelivery_through(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []

    async def flaky(event: ReplyEvent) -> None:
        calls.append(event.session_external_id)
        if len(calls) == 1:
            raise RuntimeError("boom")

    app = first_reply_app(flaky)
    client = await serve(app)
    assert (await client.post("/webhook", json={"session_external_id": "x"})).status == 202
    await app[WEBHOOK_HANDLER].drain(5)
    assert "on_reply failed" in caplog.text
    assert (await client.post("/webhook", json={"session_external_id": "x"})).status == 202
    await app[WEBHOOK_HANDLER].drain(5)
    assert (await client.post("/webhook", json={"session_external_id": "x"})).status == 200
    assert calls == ["x", "x"]


# -- duplicates detected through a ledger ---------------------------------------


async def test_a_fresh_app_sharing_the_ledger_ignores_a_redelivery(
    serve: Any, new_ledger: NewLedger
) -> None:
    recorder = Recorder()
    body = {"session_external_id": "s-1"}
    async with new_ledger() as ledger, new_ledger() as replica_ledger:
        first = first_reply_app(recorder, dedupe=ledger)
        assert (await (await serve(first)).post("/webhook", json=body)).status == 202
        await first[WEBHOOK_HANDLER].drain(5)
        # A restarted or replicated receiver: a new app, its own connection.
        second = first_reply_app(recorder, dedupe=replica_ledger)
        client = await serve(second)
        answer = await client.post("/webhook", json={"data": body})
        assert (answer.status, await answer.json()) == (
            200,
            {"status": "duplicate", "session_external_id": "s-1"},
        )
        assert (await client.post("/webhook", json={"session_external_id": "s-2"})).status == 202
        await second[WEBHOOK_HANDLER].drain(5)
    assert [e.session_external_id for e in recorder.events] == ["s-1", "s-2"]
    assert (first[WEBHOOK_HANDLER].received, second[WEBHOOK_HANDLER].received) == (1, 1)


async def test_a_failed_on_reply_is_forgotten_by_the_ledger(
    serve: Any, new_ledger: NewLedger
) -> None:
    calls: list[str] = []

    async def flaky(event: ReplyEvent) -> None:
        calls.append(event.session_external_id)
        if len(calls) == 1:
            raise RuntimeError("boom")

    body = {"session_external_id": "x"}
    async with new_ledger() as ledger:
        first = first_reply_app(flaky, dedupe=ledger)
        assert (await (await serve(first)).post("/webhook", json=body)).status == 202
        await first[WEBHOOK_HANDLER].drain(5)
        second = first_reply_app(flaky, dedupe=ledger)
        client = await serve(second)
        assert (await client.post("/webhook", json=body)).status == 202
        await second[WEBHOOK_HANDLER].drain(5)
        assert (await client.post("/webhook", json=body)).status == 200
    assert calls == ["x", "x"]


async def test_a_failing_ledger_answers_503_and_tells_nothing(
    serve: Any, new_ledger: NewLedger, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()
    ledger = new_ledger()  # not open: every operation fails with LedgerError
    app = first_reply_app(recorder, dedupe=ledger)
    client = await serve(app)
    body = {"session_external_id": "s-1"}
    answer = await client.post("/webhook", json=body)
    assert answer.status == 503
    assert (await answer.json())["error"] == "unavailable"
    assert "ledger" not in await answer.text()
    assert journal_of(ledger) not in await answer.text()
    assert "duplicate detection failed for s-1" in caplog.text
    async with ledger:  # the sender's retry, once the ledger is back, goes through
        assert (await client.post("/webhook", json=body)).status == 202
        await app[WEBHOOK_HANDLER].drain(5)
    assert [e.session_external_id for e in recorder.events] == ["s-1"]


async def test_a_ledger_failing_to_forget_is_logged(
    serve: Any, new_ledger: NewLedger, caplog: pytest.LogCaptureFixture
) -> None:
    async with new_ledger() as ledger:

        async def on_reply(event: ReplyEvent) -> None:
            await ledger.aclose()
            raise RuntimeError("boom")

        app = first_reply_app(on_reply, dedupe=ledger)
        client = await serve(app)
        assert (await client.post("/webhook", json={"session_external_id": "s-1"})).status == 202
        await app[WEBHOOK_HANDLER].drain(5)
    assert "could not forget s-1, a redelivery will be ignored" in caplog.text


async def test_slow_on_reply_does_not_block_the_answer(serve: Any) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def slow(event: ReplyEvent) -> None:
        started.set()
        await release.wait()

    app = first_reply_app(slow)
    client = await serve(app)
    began = time.monotonic()
    response = await asyncio.wait_for(client.post("/webhook", json={"session_external_id": "s"}), 2)
    assert response.status == 202
    assert time.monotonic() - began < 1.0
    await asyncio.wait_for(started.wait(), 2)
    assert app[WEBHOOK_HANDLER].pending == 1
    release.set()
    await app[WEBHOOK_HANDLER].drain(2)
    assert app[WEBHOOK_HANDLER].pending == 0


async def test_sync_on_reply_is_supported(serve: Any) -> None:
    seen: list[str] = []
    app = first_reply_app(lambda e: seen.append(e.session_external_id))
    client = await serve(app)
    await client.post("/webhook", json={"session_external_id": "sync"})
    await app[WEBHOOK_HANDLER].drain(2)
    assert seen == ["sync"]


async def test_shutdown_waits_then_cancels_pending_tasks() -> None:
    finished: list[str] = []
    cancelled = asyncio.Event()

    async def on_reply(event: ReplyEvent) -> None:
        try:
            await asyncio.sleep(0.05 if event.session_external_id == "quick" else 60)
            finished.append(event.session_external_id)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    app = first_reply_app(on_reply, shutdown_grace=0.5)
    client: Client = TestClient(TestServer(app))
    await client.start_server()
    try:
        for sid in ("quick", "stuck"):
            assert (await client.post("/webhook", json={"session_external_id": sid})).status == 202
    finally:
        began = time.monotonic()
        await client.close()
    assert finished == ["quick"]
    assert cancelled.is_set()
    assert app[WEBHOOK_HANDLER].pending == 0
    assert time.monotonic() - began < 5


async def test_handler_mounted_in_own_app(serve: Any) -> None:
    recorder = Recorder()
    app = web.Application()
    handler = first_reply_handler(recorder, secret="x")
    handler.install(app, "/campaign/reply")
    app.router.add_post("/by-hand", handler.handle)
    client = await serve(app)
    response = await client.post(
        "/campaign/reply", json={"session_external_id": "m"}, headers={DEFAULT_SECRET_HEADER: "x"}
    )
    assert response.status == 202
    response = await client.post(
        "/by-hand", json={"session_external_id": "n"}, headers={DEFAULT_SECRET_HEADER: "x"}
    )
    assert response.status == 202
    await handler.drain(2)
    assert [e.session_external_id for e in recorder.events] == ["m", "n"]
    assert "secret=set" in repr(handler)


async def test_sandbox_webhook_reaches_the_app() -> None:
    """End to end: the sandbox's simulated first reply POSTs to a real server."""
    recorder = Recorder()
    app = first_reply_app(recorder, secret=None)
    async with serving(app) as url, Sandbox(speed=200) as sb, sb.client() as client:
        await sb.set_webhook(f"{url}/webhook", kinds=["response"])
        polls = await client.list_polls()
        user = User(cellphone="3001234567", country_code="+57", user_session_keys={"name": "Ana"})
        ack = await client.send_campaign(polls[0].id, [user])
        for _ in range(200):
            status = await client.get_campaign_status(ack.launch_request_id)
            if status.deployments and all(
                d.status and d.status.is_final for d in status.deployments
            ):
                break
            await asyncio.sleep(0.02)
        result = await sb.reply("3001234567", text="Hola")
        assert result["webhook"]["status"] == 202
        await asyncio.wait_for(recorder.got.wait(), 5)
        event = recorder.events[0]
        assert event.session_external_id == result["session_external_id"]
        assert event.keys.get("name") == "Ana"
        update = await client.update_session(event.session_external_id, {"plan": "gold"})
        assert update.session_id


async def test_a_nul_id_is_refused_before_the_ledger(
    serve: Any, new_ledger: NewLedger, caplog: pytest.LogCaptureFixture
) -> None:
    # It was answered 503 for good with PostgreSQL, its raw id logged.
    recorder = Recorder()
    async with new_ledger() as ledger:
        client = await serve(first_reply_app(recorder, dedupe=ledger))
        for sid in ("a\x00b", "a\nINJECTED", "a\u2028INJECTED", "a\x85INJECTED"):
            real = {"session_id": sid, "responded_at": "2019-01-01 00:00:00"}
            for body in ({"session_external_id": sid}, real):
                answer = await client.post("/webhook", json=body)
                assert answer.status == 422
        assert await ledger.prune_seen("first_reply", time.time() + 1) == 0
    assert recorder.events == []
    assert not any("INJECTED" in r.getMessage() for r in caplog.records)


async def test_ids_seen_are_forgotten_after_the_retention(
    serve: Any, new_ledger: NewLedger
) -> None:
    # They were kept in the ledger for good.
    async with new_ledger() as ledger:
        client = await serve(first_reply_app(Recorder(), dedupe=ledger, retention=0.5))
        answers = [(await client.post("/webhook", json={"session_external_id": "a"})).status]
        answers.append((await client.post("/webhook", json={"session_external_id": "a"})).status)
        await asyncio.sleep(0.6)
        answers.append((await client.post("/webhook", json={"session_external_id": "b"})).status)
        # Only "b" is left: "a" was pruned as "b" arrived.
        assert await ledger.prune_seen("first_reply", time.time() + 1) == 1
    assert answers == [202, 200, 202]


async def test_real_payloads_are_read(serve: Any) -> None:
    recorder = Recorder()
    app = first_reply_app(recorder)
    client = await serve(app)
    for body in (
        {"session_id": "r-1", "responded_at": "2019-01-01 00:00:00"},
        {"session": {"external_id": "c-1", "closed_at": "2019-01-01 00:00:00"}},
    ):
        assert (await client.post("/webhook", json=body)).status == 202
    await app[WEBHOOK_HANDLER].drain(5)
    assert sorted(e.session_external_id for e in recorder.events) == ["c-1", "r-1"]


async def test_only_a_reply_takes_the_sessions_first_reply(serve: Any) -> None:
    # Delivered and read events of the session came first and took its slot:
    # the real reply was swallowed as a duplicate; a template status was 422.
    recorder = Recorder()
    app = first_reply_app(recorder)
    client = await serve(app)
    for body in (samples.DELIVERED, samples.READ, samples.TEMPLATE_STATUS):
        answer = await client.post("/webhook", json=body)
        assert (answer.status, await answer.json()) == (200, {"status": "ignored"})
    assert (await client.post("/webhook", json=samples.RESPONSE)).status == 202
    await app[WEBHOOK_HANDLER].drain(5)
    [event] = recorder.events
    assert (event.session_external_id, event.keys["name"]) == ("1234", "Juan")
    assert event.payload == samples.RESPONSE


def test_the_first_reply_helpers_are_deprecated() -> None:
    with pytest.warns(DeprecationWarning, match="webhook_app"):
        first_reply_app(Recorder())
    with pytest.warns(DeprecationWarning, match="parse_event"):
        extract_reply({"session_id": "1", "read_at": "2019-01-01 00:00:00"})
