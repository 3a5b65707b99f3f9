"""The three mounts of the one receiver, each through its framework's own test
client (aiohttp's, httpx's ASGITransport into FastAPI, Django's AsyncClient):
the same answers, deadline and late keys, dedupe, secret, ``ledger=``,
``kinds=``. The receiver's rules themselves are in test_receiver.py."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI
from helpers import webhook_samples as samples
from helpers.ledgers import NewLedger
from starlette.routing import Route
from webhooks.django_site import URLS, configured
from webhooks.receivers import ALL_SAMPLES, Calls, CountingStore, Recorder, Updates

from campaignkit import SessionKey
from campaignkit.webhooks import (
    EVENTS_NAMESPACE,
    EventKind,
    asgi_app,
    django_view,
    parse_event,
    webhook_app,
)

pytestmark = pytest.mark.timeout(30)

Post = Callable[..., Awaitable[tuple[int, Any]]]
"""``post(body, headers=None, method="POST") -> (status, decoded answer)``."""
Mount = Callable[..., Awaitable[Post]]
"""``mount(on_event, **options)``: the receiver served, and how to post to it."""


@contextlib.asynccontextmanager
async def _aiohttp(serve: Any) -> AsyncIterator[Mount]:
    async def mount(on_event: Any, **options: Any) -> Post:
        client = await serve(webhook_app(on_event, **options))

        async def post(body: bytes, headers: Any = None, method: str = "POST") -> Any:
            async with client.request(method, "/webhook", data=body, headers=headers) as answer:
                return answer.status, _decoded(await answer.read())

        return post

    yield mount


@contextlib.asynccontextmanager
async def _fastapi() -> AsyncIterator[Mount]:
    async with contextlib.AsyncExitStack() as stack:

        async def mount(on_event: Any, **options: Any) -> Post:
            receiver = asgi_app(on_event, **options)
            stack.push_async_callback(receiver.aclose)
            # A route of its own: mounted (app.mount), its URL would end with a slash.
            app = FastAPI(routes=[Route("/webhook", receiver, methods=["POST"])])
            transport = httpx.ASGITransport(app=app)
            http = await stack.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://testserver")
            )

            async def post(body: bytes, headers: Any = None, method: str = "POST") -> Any:
                answer = await http.request(method, "/webhook", content=body, headers=headers)
                return answer.status_code, _decoded(answer.content)

            return post

        yield mount


@contextlib.asynccontextmanager
async def _django() -> AsyncIterator[Mount]:
    from django.test import AsyncClient
    from django.urls import path

    views = []

    async def mount(on_event: Any, **options: Any) -> Post:
        view = django_view(on_event, **options)
        views.append(view)
        URLS.set([path("webhook", view)])
        http = AsyncClient(enforce_csrf_checks=True)

        async def post(body: bytes, headers: Any = None, method: str = "POST") -> Any:
            if method == "POST":
                answer = await http.post(
                    "/webhook", body, content_type="application/json", headers=headers or {}
                )
            else:
                answer = await http.generic(method, "/webhook")
            return answer.status_code, _decoded(answer.content)

        return post

    with configured():
        try:
            yield mount
        finally:
            for view in views:
                await asyncio.to_thread(view.close)


@pytest.fixture(params=["aiohttp", "fastapi", "django"])
async def mount(request: pytest.FixtureRequest, serve: Any) -> AsyncIterator[Mount]:
    mounts = {"aiohttp": lambda: _aiohttp(serve), "fastapi": _fastapi, "django": _django}
    async with mounts[request.param]() as mounted:
        yield mounted


def _json(body: Any) -> bytes:
    return orjson.dumps(body)


def _decoded(answer: bytes) -> Any:
    """A JSON answer decoded; a framework's own (a 405's) as its text."""
    try:
        return orjson.loads(answer)
    except orjson.JSONDecodeError:
        return answer.decode()


async def test_a_response_is_answered_with_the_callbacks_keys(mount: Mount) -> None:
    calls = Calls({"server_user_valid": "yes"})
    post = await mount(calls)
    assert await post(_json(samples.RESPONSE)) == (
        200,
        {"user_session_keys": [{"key": "server_user_valid", "value": "yes"}]},
    )
    [event] = calls.events
    assert (event.kind, event.session_id, event.answer) == (
        EventKind.RESPONSE,
        "1234",
        "Si necesito",
    )


async def test_a_plain_function_answers_too(mount: Mount) -> None:
    post = await mount(lambda event: [SessionKey("kind", event.kind.value, "text")])
    status, answer = await post(_json(samples.DELIVERED))
    assert (status, answer) == (
        200,
        {"user_session_keys": [{"key": "kind", "value": "delivered", "type": "text"}]},
    )


async def test_every_published_kind_is_passed_once(mount: Mount) -> None:
    calls, recorder = Calls(), Recorder()
    post = await mount(calls, ledger=recorder)
    for body in ALL_SAMPLES + ALL_SAMPLES:
        assert await post(_json(body)) == (200, {"user_session_keys": []})
    kinds = [e.kind for e in calls.events]
    assert kinds == [parse_event(body).kind for body in ALL_SAMPLES]
    assert recorder.events == calls.events


async def test_kinds_filters(mount: Mount) -> None:
    calls = Calls({"x": "y"})
    post = await mount(calls, kinds={EventKind.RESPONSE})
    assert await post(_json(samples.DELIVERED)) == (200, {"user_session_keys": []})
    assert (await post(_json(samples.RESPONSE)))[1] == {
        "user_session_keys": [{"key": "x", "value": "y"}]
    }
    assert [e.kind for e in calls.events] == [EventKind.RESPONSE]


async def test_the_secret_is_the_whole_header_value(mount: Mount) -> None:
    calls = Calls()
    post = await mount(calls, secret="Bearer s3cret", secret_header="Authorization")
    for headers in ({}, {"Authorization": "s3cret"}, {"Authorization": "Bearer s3cre"}):
        status, answer = await post(_json(samples.READ), headers)
        assert (status, answer["error"]) == (401, "unauthorized")
    assert (await post(_json(samples.READ), {"authorization": "Bearer s3cret"}))[0] == 200
    assert len(calls.events) == 1


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        pytest.param(b"{not json", 400, "bad_json", id="not-json"),
        pytest.param(_json([samples.READ]), 400, "not_an_object", id="array"),
        pytest.param(_json({**samples.READ, "session_id": "1\nFAKE"}), 422, "bad_field", id="id"),
        pytest.param(_json({**samples.READ, "pad": "x" * 2000}), 413, "too_large", id="big"),
    ],
)
async def test_bad_input_is_refused_before_anything_is_stored(
    mount: Mount, body: bytes, status: int, code: str
) -> None:
    calls, store = Calls(), CountingStore()
    post = await mount(calls, dedupe=store, max_body=1024)
    answered, answer = await post(body)
    assert (answered, answer["error"]) == (status, code)
    assert (calls.events, store.seen) == ([], {})


async def test_only_post_is_answered(mount: Mount) -> None:
    calls = Calls()
    post = await mount(calls)
    assert (await post(b"", method="GET"))[0] == 405
    assert calls.events == []


async def test_a_failing_store_is_503_and_the_callback_not_called(mount: Mount) -> None:
    calls = Calls()
    post = await mount(calls, dedupe=CountingStore(fail=True))
    status, answer = await post(_json(samples.READ))
    assert (status, answer["error"]) == (503, "unavailable")
    assert calls.events == []


async def test_a_failing_callback_answers_empty_and_is_handled_again(mount: Mount) -> None:
    calls = Calls(RuntimeError("boom"))
    post = await mount(calls)
    for _ in range(2):
        assert await post(_json(samples.RESPONSE)) == (200, {"user_session_keys": []})
    assert len(calls.events) == 2


async def test_a_slow_callback_is_answered_at_the_deadline_and_updates_later(
    mount: Mount,
) -> None:
    updates = Updates()
    post = await mount(Calls({"late": "yes"}, delay=0.5), deadline=0.1, client=updates)
    started = time.monotonic()
    assert await post(_json(samples.RESPONSE)) == (200, {"user_session_keys": []})
    assert time.monotonic() - started < 0.45
    await updates.wait(1)
    assert updates.calls == [("1234", (SessionKey("late", "yes"),))]


# -- each framework's own way of serving ------------------------------------------------


def test_under_starlettes_test_client_late_keys_go_out_within_the_shutdown_grace() -> None:
    """Mounted in Starlette, closed by the app's lifespan: a late callback that
    ends within the grace has its update_session sent, not cancelled."""
    from starlette.applications import Starlette
    from starlette.routing import Mount as Mounted
    from starlette.testclient import TestClient

    updates = Updates()
    receiver = asgi_app(
        Calls({"late": "yes"}, delay=0.3), deadline=0.05, client=updates, secret="s3cret"
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await receiver.aclose()

    app = Starlette(routes=[Mounted("/hooks", receiver)], lifespan=lifespan)
    with TestClient(app) as http:
        assert http.post("/hooks/", json=samples.RESPONSE).status_code == 401
        answer = http.post("/hooks/", json=samples.RESPONSE, headers={"X-Webhook-Secret": "s3cret"})
        assert (answer.status_code, answer.json()) == (200, {"user_session_keys": []})
        assert answer.headers["content-type"] == "application/json"
        assert updates.calls == []
    assert updates.calls == [("1234", (SessionKey("late", "yes"),))]


def test_served_alone_it_closes_at_the_lifespan_shutdown() -> None:
    from starlette.testclient import TestClient

    updates = Updates()
    receiver = asgi_app(Calls({"late": "yes"}, delay=0.3), deadline=0.05, client=updates)
    with TestClient(receiver) as http:
        assert http.post("/", json=samples.RESPONSE).json() == {"user_session_keys": []}
        assert http.get("/").headers["allow"] == "POST"
    assert updates.calls == [("1234", (SessionKey("late", "yes"),))]


def _wait_for(updates: Updates, count: int) -> None:
    for _ in range(250):
        if len(updates.calls) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{len(updates.calls)} update_session calls, wanted {count}")


def test_under_djangos_test_client_late_keys_outlive_the_requests_loop() -> None:
    """Django's Client calls the async view on a loop that ends with the
    request (as under WSGI): the late callback runs on on the receiver's own."""
    from django.test import Client
    from django.urls import path

    updates = Updates()
    view = django_view(Calls({"late": "yes"}, delay=0.3), deadline=0.05, client=updates)
    with configured() as urls:
        urls.set([path("webhook", view)])
        try:
            http = Client(enforce_csrf_checks=True)
            answer = http.post("/webhook", samples.RESPONSE, content_type="application/json")
            assert (answer.status_code, answer.json()) == (200, {"user_session_keys": []})
            assert answer["Content-Type"] == "application/json"
            _wait_for(updates, 1)
            assert updates.calls == [("1234", (SessionKey("late", "yes"),))]
        finally:
            view.close()


def test_a_django_view_dedupes_and_records_on_a_ledger_opened_on_its_loop(
    new_ledger: NewLedger,
) -> None:
    from django.test import Client
    from django.urls import path

    calls = Calls({"ok": "yes"})
    ledger = new_ledger()
    view = django_view(calls, dedupe=ledger, ledger=ledger)
    with configured() as urls:
        urls.set([path("webhook", view)])
        try:
            view.run(ledger.open())
            http = Client()
            for body in (samples.RESPONSE, samples.RESPONSE, samples.READ):
                answer = http.post("/webhook", body, content_type="application/json")
                assert answer.status_code == 200
            assert [e.kind for e in calls.events] == [EventKind.RESPONSE, EventKind.READ]
            assert not view.run(ledger.first_sighting(EVENTS_NAMESPACE, _key(samples.READ)))
        finally:
            view.run(ledger.aclose())
            view.close()


def _key(body: dict[str, Any]) -> str:
    from campaignkit.webhooks._checks import delivery_key

    key = delivery_key(parse_event(body))
    assert key is not None
    return key


def test_importing_the_webhooks_needs_no_framework() -> None:
    code = (
        "import sys, campaignkit.webhooks as w; "
        "assert w.asgi_app and w.django_view; "
        "print(sorted({m.split('.')[0] for m in sys.modules} "
        "& {'django', 'starlette', 'fastapi', 'asgiref', 'uvicorn', 'httpx'}))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert ran.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("chunks", "status"),
    [
        pytest.param(
            [b'{"read_at": "2019-01-01 00:00:00", ', b'"session_id": "1"}'], 200, id="two"
        ),
        pytest.param([b'{"session_id": "', b"x" * 1000, b'"}'], 413, id="over-no-length"),
        pytest.param([b'{"session_id": "1",'], 400, id="cut-short"),
    ],
)
async def test_an_asgi_body_in_several_messages_is_read_up_to_max_body(
    chunks: list[bytes], status: int
) -> None:
    """No content-length (a chunked upload): the receiver counts as it reads."""
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": chunk, "more_body": index < len(chunks) - 1}
        for index, chunk in enumerate(chunks)
    ]
    if status == 400:
        messages[-1]["more_body"] = True  # then the sender goes away
        messages.append({"type": "http.disconnect"})
    sent: list[dict[str, Any]] = []

    async def receive() -> Any:
        return messages.pop(0)

    async def send(message: Any) -> None:
        sent.append(message)

    receiver = asgi_app(Calls(), max_body=512)
    scope = {"type": "http", "method": "POST", "path": "/", "headers": []}
    await receiver(scope, receive, send)
    assert sent[0]["status"] == status
    await receiver.aclose()
