"""The aiohttp adapter of the exchange seam against real servers on 127.0.0.1.

aiohttp.web serves the well-behaved answers; raw asyncio servers the
misbehaviour aiohttp.web cannot produce (a connection closed after the
request, an answer cut mid-body, an answer that never comes). Every test is
bounded in time; none patches aiohttp.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import select
import socket
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import attrs
import pytest
from aiohttp import web
from helpers.servers import serving

from campaignkit import CampaignKitError, ClientConfig, ConnectionError, ResponseError, TimeoutError
from campaignkit._io.aiohttp_exchange import AiohttpExchange
from campaignkit._wire import sansio as wire
from campaignkit.testing import Answer

pytestmark = pytest.mark.timeout(15)

KEY = "sk_live_adapter_SECRET_9f8e7d6c5b"
JSON_OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]"


@pytest.fixture(autouse=True)
def no_key_in_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """aiohttp's and asyncio's DEBUG records never carry the key either."""
    caplog.set_level(logging.DEBUG)
    yield
    for record in caplog.records:
        assert KEY not in record.getMessage()
        assert KEY not in repr(record.args)


def assert_keyless(exc: BaseException) -> None:
    for text in (str(exc), repr(exc), "".join(traceback.format_exception(exc))):
        assert KEY not in text


def config(base: str, **settings: Any) -> ClientConfig:
    return ClientConfig(KEY, base_url=base, campaign_url=base, **settings)


def polls(cfg: ClientConfig) -> wire.Request:
    return wire.build_request(cfg, wire.LIST_POLLS)


def send(cfg: ClientConfig) -> wire.Request:
    return wire.build_request(
        cfg,
        wire.SEND_CAMPAIGN,
        path_params={"poll_id": "12"},
        json={"users": [{"cellphone": "3001234567", "country_code": "+57"}]},
    )


async def exchange_once(
    cfg: ClientConfig, request: wire.Request, timeout: float | None = None
) -> Answer:
    exchange = AiohttpExchange(cfg)
    try:
        return await exchange(request, cfg.timeout if timeout is None else timeout)
    finally:
        await exchange.aclose()


# -- raw servers --------------------------------------------------------------------


@attrs.define
class Received:
    """One request as it arrived on the wire."""

    line: str
    headers: dict[str, str]
    body: bytes


async def read_request(reader: asyncio.StreamReader) -> Received | None:
    """The next request of a connection, or None at its end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionResetError):
        return None
    line, *fields = head.decode("latin-1").split("\r\n")[:-2]
    headers = {}
    for field in fields:
        name, _, value = field.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Received(line, headers, body)


Handler = Callable[[int, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class RawServer:
    """Runs ``handler(connection_number, reader, writer)`` per connection."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[Received] = []
        self._writers: list[asyncio.StreamWriter] = []

    async def next_request(self, reader: asyncio.StreamReader) -> Received | None:
        received = await read_request(reader)
        if received is not None:
            self.requests.append(received)
        return received

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = self.connections
        self.connections += 1
        self._writers.append(writer)
        try:
            await self.handler(number, reader, writer)
        except ConnectionError:
            pass
        finally:
            writer.close()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        server = await asyncio.start_server(self._on_connect, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.close()
            for writer in self._writers:
                writer.close()  # a handler waiting for the end of input ends
            await asyncio.wait_for(server.wait_closed(), 5)


async def until_closed(reader: asyncio.StreamReader) -> None:
    """Wait, answering nothing, until the client goes away."""
    while await reader.read(1 << 16):
        pass


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# -- failures and what they mean for the request ------------------------------------


async def test_connection_refused_is_before_any_byte() -> None:
    cfg = config(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ConnectionError) as caught:
        await asyncio.wait_for(exchange_once(cfg, send(cfg)), 10)
    assert caught.value.request_sent is False
    assert "send_campaign" in str(caught.value)
    assert_keyless(caught.value)


@pytest.mark.parametrize("build", [polls, send], ids=["GET", "POST"])
async def test_closed_after_reading_the_request_may_have_arrived(
    build: Callable[[ClientConfig], wire.Request],
) -> None:
    async def close_once_read(_: int, reader: asyncio.StreamReader, __: Any) -> None:
        await server.next_request(reader)

    server = RawServer(close_once_read)
    async with server.serving() as base:
        cfg = config(base)
        request = build(cfg)
        with pytest.raises(ConnectionError) as caught:
            await asyncio.wait_for(exchange_once(cfg, request), 10)
    assert caught.value.request_sent is True
    assert_keyless(caught.value)
    # One attempt, one request: aiohttp's silent resend of a GET is off.
    [received] = server.requests
    assert received.line.startswith(f"{request.endpoint.method} ")
    assert received.body == (request.body or b"")


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n[1,2,3,",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n64\r\n[1,2,3,",
    ],
    ids=["content-length", "chunked"],
)
async def test_an_answer_cut_mid_body_may_have_arrived(answer: bytes) -> None:
    async def cut(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.next_request(reader)
        writer.write(answer)
        await writer.drain()

    server = RawServer(cut)
    async with server.serving() as base:
        cfg = config(base)
        with pytest.raises(ConnectionError) as caught:
            await asyncio.wait_for(exchange_once(cfg, send(cfg)), 10)
    assert caught.value.request_sent is True
    assert_keyless(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "head",
    [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n[1,"],
    ids=["no-answer", "stalled-body"],
)
async def test_a_slow_answer_times_out_after_sending(head: bytes) -> None:
    async def slow(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.next_request(reader)
        writer.write(head)
        await writer.drain()
        await until_closed(reader)

    server = RawServer(slow)
    async with server.serving() as base:
        cfg = config(base, timeout=30.0)
        started = time.monotonic()
        with pytest.raises(TimeoutError) as caught:
            await asyncio.wait_for(exchange_once(cfg, send(cfg), timeout=0.3), 10)
        elapsed = time.monotonic() - started
    assert caught.value.request_sent is True
    assert "0.3 s" in str(caught.value)  # the per-call timeout, not the config's
    assert 0.25 <= elapsed < 5
    assert_keyless(caught.value)
    assert len(server.requests) == 1


@contextlib.contextmanager
def full_backlog() -> Iterator[int]:
    """A port whose listen queue is full, so a connect gets no answer.

    On Linux a SYN to a full queue is dropped; where a connect completes
    anyway (other systems), the case is skipped rather than imitated.
    """
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket())
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port: int = listener.getsockname()[1]
        for _ in range(8):
            filler = stack.enter_context(socket.socket())
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            _, writable, _ = select.select([], [filler], [], 0.3)
            if not writable:
                yield port
                return
        pytest.skip("this system completes connects to a full listen queue")


async def test_connect_timeout_is_before_any_byte() -> None:
    with full_backlog() as port:
        cfg = config(f"http://127.0.0.1:{port}", timeout=10.0, connect_timeout=0.3)
        started = time.monotonic()
        with pytest.raises(TimeoutError) as caught:
            await asyncio.wait_for(exchange_once(cfg, send(cfg)), 10)
        elapsed = time.monotonic() - started
    assert caught.value.request_sent is False
    assert 0.25 <= elapsed < 5
    assert_keyless(caught.value)


class RecordingConnector(aiohttp.TCPConnector):
    """Records the timeouts aiohttp connects with."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[aiohttp.ClientTimeout] = []

    async def connect(self, req: Any, traces: Any, timeout: aiohttp.ClientTimeout) -> Any:
        self.timeouts.append(timeout)
        return await super().connect(req, traces, timeout)


async def test_timeouts_given_to_aiohttp() -> None:
    app = web.Application()
    app.router.add_get("/poll/api/all", answering(lambda: web.json_response([])))
    connector = RecordingConnector()
    async with serving(app) as base, aiohttp.ClientSession(connector=connector) as session:
        cfg = config(base, timeout=4.0, connect_timeout=10.0)
        exchange = AiohttpExchange(cfg, session)
        for timeout in (4.0, 3.5, 30.0):
            assert (await exchange(polls(cfg), timeout)).status == 200
        await exchange.aclose()
    assert [(t.total, t.connect) for t in connector.timeouts] == [
        (4.0, 4.0),  # the configured timeout, the connect phase within it
        (3.5, 3.5),  # a per-call timeout
        (30.0, 10.0),  # the connect timeout when shorter
    ]


# -- answers ------------------------------------------------------------------------


def answering(response: Callable[[], web.StreamResponse]) -> Callable[..., Any]:
    async def handle(_: web.Request) -> web.StreamResponse:
        return response()

    return handle


def sized_app(size: int) -> tuple[web.Application, bytes]:
    """``/poll/api/all`` answers ``size`` bytes with a Content-Length,
    ``/chunked`` the same bytes in chunks without one."""
    body = b"[" + b"1," * ((size - 2) // 2) + b"1" * (size % 2) + b"]"
    body = body if len(body) == size else body[: size - 1] + b"]"
    assert len(body) == size

    async def chunked(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, size, 16):
            await response.write(body[start : start + 16])
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/poll/api/all", answering(lambda: web.Response(body=body)))
    app.router.add_get("/chunked", chunked)
    return app, body


@pytest.mark.parametrize("path", ["/poll/api/all", "/chunked"], ids=["length", "chunked"])
async def test_an_answer_over_max_response_bytes(path: str) -> None:
    async with serving(sized_app(100)[0]) as base:
        cfg = config(base, max_response_bytes=64)
        request = wire.build_request_to_url(cfg, wire.LIST_POLLS, base + path)
        with pytest.raises(ResponseError, match="max_response_bytes=64") as caught:
            await asyncio.wait_for(exchange_once(cfg, request), 10)
    assert caught.value.status == 200
    assert_keyless(caught.value)


@pytest.mark.parametrize("path", ["/poll/api/all", "/chunked"], ids=["length", "chunked"])
async def test_an_answer_of_exactly_max_response_bytes(path: str) -> None:
    app, body = sized_app(64)
    async with serving(app) as base:
        cfg = config(base, max_response_bytes=64)
        request = wire.build_request_to_url(cfg, wire.LIST_POLLS, base + path)
        answer = await asyncio.wait_for(exchange_once(cfg, request), 10)
    assert answer.status == 200
    assert answer.body == body


async def test_a_302_is_returned_not_followed() -> None:
    followed: list[str] = []

    async def elsewhere(request: web.Request) -> web.Response:
        followed.append(request.path)
        return web.json_response([])

    app = web.Application()
    app.router.add_get(
        "/poll/api/all",
        answering(lambda: web.Response(status=302, headers={"Location": "/elsewhere"})),
    )
    app.router.add_get("/elsewhere", elsewhere)
    async with serving(app) as base:
        cfg = config(base)
        answer = await asyncio.wait_for(exchange_once(cfg, polls(cfg)), 10)
    assert answer.status == 302
    assert answer.headers["Location"] == "/elsewhere"
    assert followed == []


async def test_answer_headers_are_case_insensitive() -> None:
    app = web.Application()
    app.router.add_get(
        "/poll/api/all",
        answering(lambda: web.json_response([], status=429, headers={"Retry-After": "7"})),
    )
    async with serving(app) as base:
        cfg = config(base)
        answer = await asyncio.wait_for(exchange_once(cfg, polls(cfg)), 10)
    assert answer.status == 429
    assert answer.body == b"[]"
    assert answer.headers["retry-after"] == answer.headers["RETRY-AFTER"] == "7"
    assert answer.headers["content-type"].startswith("application/json")


async def test_the_request_goes_out_as_built() -> None:
    async def answer(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.next_request(reader):
            writer.write(JSON_OK)
            await writer.drain()

    server = RawServer(answer)
    async with server.serving() as base:
        cfg = config(base)
        traversal = wire.build_request(
            cfg, wire.CAMPAIGN_STATUS, path_params={"launch_request_id": "..%2Fa%3Fx%3D1%23f"}
        )
        exchange = AiohttpExchange(cfg)
        try:
            for request in (send(cfg), traversal):
                assert (await asyncio.wait_for(exchange(request, 5), 10)).body == b"[]"
        finally:
            await exchange.aclose()
    posted, got = server.requests
    assert posted.line == "POST /v2/send-campaign/12 HTTP/1.1"
    assert posted.body == send(cfg).body
    assert posted.headers["authorization"] == KEY
    assert posted.headers["content-type"] == "application/json"
    assert posted.headers["user-agent"] == wire.USER_AGENT
    # The encoded segment is not re-normalised on the way out.
    assert got.line == "GET /v2/send-campaign/..%2Fa%3Fx%3D1%23f HTTP/1.1"
    assert got.body == b""
    assert server.connections == 1  # pooled


# -- aiohttp's hidden resend ---------------------------------------------------------


async def test_a_dropped_pooled_connection_is_not_resent() -> None:
    """aiohttp resends a GET once when a connection drops; ours is the only
    retry policy, so one attempt is one request."""

    async def drop_the_second(
        number: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        served = 0
        while await server.next_request(reader):
            served += 1
            if number == 0 and served == 2:
                return  # the pooled connection drops, its request unanswered
            writer.write(JSON_OK)
            await writer.drain()

    server = RawServer(drop_the_second)
    async with server.serving() as base:
        cfg = config(base)
        exchange = AiohttpExchange(cfg)
        try:
            assert (await asyncio.wait_for(exchange(polls(cfg), 5), 10)).status == 200
            with pytest.raises(ConnectionError) as caught:
                await asyncio.wait_for(exchange(polls(cfg), 5), 10)
            assert caught.value.request_sent is True
            assert len(server.requests) == 2
            assert server.connections == 1
            # The next attempt (the transport's retry) takes a new connection.
            assert (await asyncio.wait_for(exchange(polls(cfg), 5), 10)).status == 200
        finally:
            await exchange.aclose()
    assert len(server.requests) == 3
    assert server.connections == 2


# -- the session's lifecycle ---------------------------------------------------------


def counting_app() -> tuple[web.Application, list[str]]:
    seen: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response([])

    app = web.Application()
    app.router.add_get("/poll/api/all", handle)
    return app, seen


async def test_an_injected_session_is_left_open() -> None:
    app, seen = counting_app()
    async with serving(app) as base, aiohttp.ClientSession() as session:
        cfg = config(base)
        exchange = AiohttpExchange(cfg, session)
        assert exchange.session is session
        assert (await exchange(polls(cfg), 5)).status == 200
        await exchange.aclose()
        assert not session.closed
        with pytest.raises(CampaignKitError, match="closed"):
            await exchange(polls(cfg), 5)
        # The session is still its owner's to use.
        async with session.get(f"{base}/poll/api/all") as response:
            assert response.status == 200
    assert seen == ["/poll/api/all"] * 2


async def test_an_owned_session_is_closed_once() -> None:
    app, seen = counting_app()
    async with serving(app) as base:
        cfg = config(base)
        exchange = AiohttpExchange(cfg)
        assert (await exchange(polls(cfg), 5)).status == 200
        session = exchange.session
        assert exchange.session is session  # pooled, not one per call
        await exchange.aclose()
        assert session.closed
        await exchange.aclose()  # idempotent
        with pytest.raises(CampaignKitError, match="closed") as caught:
            await exchange(polls(cfg), 5)
        assert not isinstance(caught.value, ConnectionError | TimeoutError)
    assert seen == ["/poll/api/all"]


async def test_closed_before_first_use_refuses_calls() -> None:
    app, seen = counting_app()
    async with serving(app) as base:
        cfg = config(base)
        exchange = AiohttpExchange(cfg)
        await exchange.aclose()
        with pytest.raises(CampaignKitError, match="closed"):
            await exchange(polls(cfg), 5)
    assert seen == []


# -- a broken proxy is named, never blamed on the service URL -------------------------

PROXY_PASSWORD = "proxy-pw-SECRET-77"
SERVICE = "campaigns.invalid"  # resolves nowhere: only a proxy could reach it


@pytest.fixture
def proxy_env(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], None]:
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch.setenv


def assert_names_the_proxy(exc: BaseException, variable: str) -> None:
    text = str(exc)
    assert "the proxy 'http://bob:***@" in text, text
    assert f"({variable})" in text, text
    assert PROXY_PASSWORD not in text + repr(exc) + "".join(traceback.format_exception(exc))


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("host", ["127.0.0.1", "proxy.invalid"], ids=["refused", "unresolved"])
async def test_an_unreachable_proxy_is_named_with_its_password_masked(
    proxy_env: Callable[[str, str], None], scheme: str, host: str
) -> None:
    variable, port = f"{scheme.upper()}_PROXY", free_port()
    proxy_env(variable, f"http://bob:{PROXY_PASSWORD}@{host}:{port}")
    cfg = config(f"{scheme}://{SERVICE}")
    with pytest.raises(ConnectionError) as caught:
        await asyncio.wait_for(exchange_once(cfg, send(cfg)), 10)
    assert caught.value.request_sent is False
    assert caught.value.proxy == f"the proxy 'http://bob:***@{host}:{port}' ({variable})"
    assert str(caught.value).startswith(f"cannot connect to {caught.value.proxy} for send_campaign")
    assert_names_the_proxy(caught.value, variable)


async def test_a_proxy_refusing_the_tunnel_is_named_and_nothing_was_sent(
    proxy_env: Callable[[str, str], None],
) -> None:
    async def refuse(_: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.next_request(reader)
        writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    server = RawServer(refuse)
    async with server.serving() as proxy:
        proxy_env("HTTPS_PROXY", proxy.replace("http://", f"http://bob:{PROXY_PASSWORD}@"))
        cfg = config(f"https://{SERVICE}")
        with pytest.raises(ConnectionError) as caught:
            await asyncio.wait_for(exchange_once(cfg, send(cfg)), 10)
    assert [request.line for request in server.requests] == [f"CONNECT {SERVICE}:443 HTTP/1.1"]
    credentials = base64.b64encode(f"bob:{PROXY_PASSWORD}".encode()).decode()
    assert server.requests[0].headers["proxy-authorization"] == f"Basic {credentials}"
    assert caught.value.request_sent is False
    assert "refused to connect send_campaign to campaigns.invalid: 407" in str(caught.value)
    assert_names_the_proxy(caught.value, "HTTPS_PROXY")


@pytest.mark.parametrize("proxy", ["proxy.local:3128", "socks5://proxy.local:1080"])
async def test_a_proxy_variable_that_is_no_proxy_url_is_a_configuration_error(
    proxy_env: Callable[[str, str], None], proxy: str
) -> None:
    proxy_env("HTTPS_PROXY", proxy)
    cfg = config(f"https://{SERVICE}")
    with pytest.raises(CampaignKitError) as caught:
        await asyncio.wait_for(exchange_once(cfg, send(cfg)), 10)
    assert type(caught.value).__name__ == "ConfigurationError"
    assert str(caught.value) == f"the proxy {proxy!r} (HTTPS_PROXY) is not a proxy URL " + (
        "(expected http://host:port)"
    )


async def test_an_unreachable_service_is_not_blamed_on_a_proxy() -> None:
    cfg = config(f"http://127.0.0.1:{free_port()}", trust_env=False)
    with pytest.raises(ConnectionError) as caught:
        await asyncio.wait_for(exchange_once(cfg, polls(cfg)), 10)
    assert caught.value.proxy is None
    assert str(caught.value).startswith("cannot connect to the service for list_polls: ")
