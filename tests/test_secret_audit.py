"""Secret audit against the real sandbox (tests/test_secrets.py does the same
with mocked answers): with DEBUG logging on the root logger, every call, every
error path and every retry, the tracker and send_bulk under every fault kind.
The API key never shows in logs, exception texts, tracebacks (with their
chains), reprs or the CLI's ``--debug`` output, not even when a service,
gateway or proxy echoes it back (tests/helpers/echo.py) into any error
class, the dashboard's pages and events, ``report.html`` or the CLI's
output; phone numbers never reach the logs; ``Authorization`` never goes to
a host other than the configured ones.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import sys
import traceback
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
import pytest
from aiohttp import web
from helpers.echo import ECHOES, echo_server
from helpers.fakes import FakeTime
from helpers.servers import serving

from campaignkit import CampaignClient, CampaignKitError, RetryPolicy, User, errors
from campaignkit.dashboard import Dashboard, dashboard_app, write_report
from campaignkit.ledger import SqliteLedger
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)

SCRIPT = Path(sys.executable).with_name("campaignkit")
USERS = [User(cellphone=f"55200{n}4321", country_code="+52") for n in range(3)]
PHONES = [user.cellphone for user in USERS]
DASHBOARD_FAST: dict[str, Any] = {"poll_interval": 0.05, "max_interval": 0.2, "discover_every": 0.1}
KINDS: list[dict[str, Any]] = [
    {"kind": "429", "retry_after": 1},
    {"kind": "429"},
    {"kind": "500"},
    {"kind": "502"},
    {"kind": "503"},
    {"kind": "504"},
    {"kind": "latency", "seconds": 0.4},
    {"kind": "drop"},
    {"kind": "drop_mid_body"},
    {"kind": "html"},
    {"kind": "html", "status": 200},
    {"kind": "truncated"},
    {"kind": "empty"},
    {"kind": "wrong_content_type"},
    {"kind": "wrong_type"},
    {"kind": "redirect"},
]


class Recorder:
    """A tiny server on another host (127.0.0.2) that records every request."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path_qs, dict(request.headers)))
        return web.json_response([])


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    rec = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", rec.handle)
    async with serving(app, "127.0.0.2") as url:
        rec.url = url
        yield rec


@pytest.fixture
def sandbox_options() -> dict[str, Any]:
    return {"legacy_enabled": True}


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)  # the root logger: aiohttp, asyncio, ours
    caplog.set_level(logging.DEBUG, logger="campaignkit")
    return caplog


def exception_texts(exc: BaseException) -> list[str]:
    """str, repr and the formatted traceback (with chains) of ``exc`` and of
    everything it links to, plus the repr of its attributes."""
    texts = ["".join(traceback.format_exception(exc, chain=True))]
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        texts += [str(current), repr(current)]
        texts += [repr(value) for value in vars(current).values()]
        todo += [current.__cause__, current.__context__, getattr(current, "cause", None)]
    return texts


def log_texts(caplog: pytest.LogCaptureFixture) -> list[str]:
    formatter = logging.Formatter()
    texts = []
    for record in caplog.records:
        texts += [record.getMessage(), repr(record.args)]
        if record.exc_info:
            texts.append(formatter.formatException(record.exc_info))
    return texts


def secret_parts(key: str) -> list[str]:
    """The key and every 12-character slice of its secret part."""
    secret = key.removeprefix("sk_tst_")
    return [key] + [secret[i : i + 12] for i in range(0, len(secret) - 11, 6)]


def assert_no_key(texts: list[str], key: str) -> None:
    assert texts, "nothing was checked"
    parts = secret_parts(key)
    for text in texts:
        for part in parts:
            assert part not in text, f"key material in: {text[:300]!r}"


Call = Callable[[CampaignClient, dict[str, Any], FakeTime], Awaitable[Any]]


async def _track(client: CampaignClient, ctx: dict[str, Any], fake: FakeTime) -> Any:
    tracker = client.track(ctx["ack"], poll_interval=0.25, max_interval=0.25, timeout=0.5)
    ctx["objects"].append(tracker)
    try:
        return [change async for change in tracker]
    finally:
        ctx["objects"].append(repr(tracker))


async def _bulk(client: CampaignClient, ctx: dict[str, Any], fake: FakeTime) -> Any:
    report = await client.send_bulk(1001, USERS, chunk_size=2, concurrency=1)
    ctx["objects"] += [report, str(report)]
    return report


async def _legacy(client: CampaignClient, ctx: dict[str, Any], fake: FakeTime) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return await client.deploy_legacy(1001, USERS)


async def _iter(client: CampaignClient, ctx: dict[str, Any], fake: FakeTime) -> Any:
    return [s async for s in client.iter_sessions(1001, page_size=2)]


CALLS: dict[str, tuple[str, Call]] = {
    "send_campaign": ("send_campaign", lambda c, x, f: c.send_campaign(1001, USERS)),
    "deploy_legacy": ("deploy_legacy", _legacy),
    "update_session": (
        "update_session",
        lambda c, x, f: c.update_session(x["session"], {"plan": "gold"}),
    ),
    "get_campaign_status": (
        "campaign_status",
        lambda c, x, f: c.get_campaign_status(x["ack"].launch_request_id),
    ),
    "list_sessions": ("list_sessions", lambda c, x, f: c.list_sessions(1001)),
    "iter_sessions": ("list_sessions", _iter),
    "get_session_history": ("session_history", lambda c, x, f: c.get_session_history(x["session"])),
    "list_polls": ("list_polls", lambda c, x, f: c.list_polls()),
    "list_agents": ("list_agents", lambda c, x, f: c.list_agents()),
    "track": ("campaign_status", _track),
    "send_bulk": ("send_campaign", _bulk),
}

ERROR_PATHS: list[Call] = [
    lambda c, x, f: c.get_campaign_status("no-such-launch"),
    lambda c, x, f: c.get_session_history("no-such-session"),
    lambda c, x, f: c.update_session("no-such-session", {"a": "b"}),
    lambda c, x, f: c.send_campaign(4242, USERS),
    lambda c, x, f: c.list_sessions(4242),
    lambda c, x, f: c.send_campaign(1001, [User(cellphone="x", country_code="y")]),
    lambda c, x, f: c.get_campaign_status("a/../b?c#d"),
    lambda c, x, f: c.list_sessions(1001, cursor="not-a-cursor"),
]


async def test_every_call_error_and_retry_keeps_the_key_and_phones_out(
    sb: Sandbox,
    recorder: Recorder,
    debug_logs: pytest.LogCaptureFixture,
    fake_time: FakeTime,
) -> None:
    key = sb.api_key
    fake = fake_time
    retry = RetryPolicy(max_retries=1, backoff_initial=0.01, backoff_max=0.02)
    failures: list[BaseException] = []
    ctx: dict[str, Any] = {"objects": []}
    runs = 0
    async with fake.install(sb.client(timeout=0.2, retry=retry)) as client:
        ctx["ack"] = await client.send_campaign(1001, USERS[:1])
        ctx["session"] = (await client.list_sessions(1001)).results[0].id
        await sb.set_clock(advance=60)
        ctx["objects"] += [
            client,
            client.config,
            client.track(ctx["ack"]),
            client.track_many([ctx["ack"]]),
        ]
        for _, invoke in CALLS.values():  # every call, no fault
            await invoke(client, ctx, fake)
            runs += 1
        for invoke in ERROR_PATHS:
            with pytest.raises(CampaignKitError) as caught:
                await invoke(client, ctx, fake)
            failures.append(caught.value)
        for fault in KINDS:  # every retry and every error under each fault
            for route, invoke in CALLS.values():
                rule = {**fault, "route": route}
                if fault["kind"] == "redirect":
                    rule["location"] = f"{recorder.url}/stolen"
                await sb.set_faults(rule)
                try:
                    await invoke(client, ctx, fake)
                except CampaignKitError as exc:
                    failures.append(exc)
                runs += 1
        await sb.clear_faults()
    # A key that contains the real one, refused: the error must not echo it.
    async with CampaignClient(
        key + "-revoked", base_url=sb.base_url, campaign_url=sb.campaign_url
    ) as wrong:
        refused: list[Callable[[CampaignClient], Awaitable[Any]]] = [
            lambda c: c.list_polls(),
            lambda c: c.send_campaign(1001, USERS),
        ]
        for call in refused:
            with pytest.raises(CampaignKitError) as caught:
                await call(wrong)
            failures.append(caught.value)
    assert runs == len(CALLS) * (len(KINDS) + 1)
    assert len(failures) > 100  # the faults did fail calls (and retry them)
    texts = [text for exc in failures for text in exception_texts(exc)]
    texts += [repr(obj) for obj in ctx["objects"]] + [str(obj) for obj in ctx["objects"]]
    assert_no_key(texts, key)
    logs = log_texts(debug_logs)
    assert sum("attempt=2" in line for line in logs) > 50  # the retries were logged
    assert_no_key(logs, key)
    for line in logs:
        for phone in PHONES:
            assert phone not in line, line
    assert recorder.seen == []  # no redirect was followed, no header left


async def test_recorder_would_see_a_request(recorder: Recorder) -> None:
    """The control for ``recorder.seen == []``: it does record what arrives."""
    import aiohttp

    async with aiohttp.ClientSession() as http, http.get(recorder.url + "/x") as response:
        assert response.status == 200
    assert [(method, path) for method, path, _ in recorder.seen] == [("GET", "/x")]


@pytest.mark.parametrize(
    "target",
    [
        "{recorder}/v2/send-campaign/abc",
        "//127.0.0.2:{port}/v2/send-campaign/abc",
        "{sandbox_other_port}/campaign/v2/send-campaign/abc",
        "https://{sandbox_host}/campaign/v2/send-campaign/abc",
    ],
)
async def test_foreign_status_url_is_refused_without_a_request(
    sb: Sandbox, recorder: Recorder, target: str
) -> None:
    url = target.format(
        recorder=recorder.url,
        port=recorder.url.rsplit(":", 1)[1],
        sandbox_other_port=f"http://127.0.0.1:{sb.port + 1}",
        sandbox_host=f"127.0.0.1:{sb.port}",
    )
    before = (await sb.admin("GET", "/faults"))["requests"]
    async with sb.client() as client:
        with pytest.raises(CampaignKitError, match="refusing status_url"):
            client.track(url)
        with pytest.raises(CampaignKitError, match="refusing status_url"):
            client.track_many([url])
    assert recorder.seen == []
    assert (await sb.admin("GET", "/faults"))["requests"] == before


async def test_redirect_to_another_host_gets_no_request(sb: Sandbox, recorder: Recorder) -> None:
    """Default sandbox redirect (127.0.0.2, same path) and one to the recorder."""
    async with sb.client() as client:
        for location in (None, f"{recorder.url}/main/poll/api/all"):
            extra = {} if location is None else {"location": location}
            await sb.set_faults({"kind": "redirect", "route": "list_polls", **extra})
            with pytest.raises(CampaignKitError, match="redirects are not followed"):
                await client.list_polls()
    assert recorder.seen == []


async def _cli(sb: Sandbox, *argv: str, key_in_env: bool = True) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGNKIT_")}
    conn = ["--base-url", sb.base_url, "--campaign-url", sb.campaign_url]
    conn += ["--agent-url", sb.agent_url]
    if key_in_env:
        env["CAMPAIGNKIT_API_KEY"] = sb.api_key
    else:
        conn += ["--api-key", sb.api_key]
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        "--debug",
        "--max-retries",
        "1",
        "--timeout",
        "1",
        *conn,
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


async def test_cli_debug_output_never_shows_the_key(sb: Sandbox, tmp_path: Path) -> None:
    users = tmp_path / "users.csv"
    users.write_text("country_code,cellphone\n+52,5530001234\n+52,5530005678\n")
    async with sb.client() as client:
        session = (await client.list_sessions(1001)).results[0].id
    runs: list[tuple[list[str], dict[str, Any] | None, int]] = [
        (["polls"], None, 0),
        (["agents"], None, 0),
        (["status", "no-such-launch"], None, 1),
        (["history", "no-such-session"], None, 1),
        (["update-session", session, "plan=gold"], None, 0),
        (["send", "1001", str(users)], {"kind": "503", "route": "send_campaign"}, 4),
        (["send", "1001", str(users), "--bulk"], {"kind": "drop", "route": "send_campaign"}, 4),
        (["polls"], {"kind": "redirect", "route": "list_polls"}, 1),
        (["agents"], {"kind": "html", "route": "list_agents"}, 1),
        (["sessions", "1001"], {"kind": "truncated", "route": "list_sessions"}, 1),
        (["status", "x"], {"kind": "drop_mid_body", "route": "campaign_status"}, 5),
    ]
    outputs = []
    for argv, fault, code in runs:
        await sb.clear_faults()
        if fault is not None:
            await sb.set_faults(fault)
        for key_in_env in (True, False):
            got, output = await _cli(sb, *argv, key_in_env=key_in_env)
            assert got == code, (argv, output)
            outputs.append(output)
    assert any("Traceback" in output for output in outputs)  # --debug showed tracebacks
    assert_no_key(outputs, sb.api_key)


# -- keys echoed back by the service, a gateway or a proxy (issue 18) --------

ECHO_KEYS = ["ak_Q3vX9kLm2Pz8Rt5Yw1Nb7Hc4Jd6Fg0Se2Ua", "sk_live_7f3a9c2e5b8d1f4a6c0e9b2d7a5f3c8e"]
ECHO_CASES: list[tuple[int, str, str, type[CampaignKitError]]] = [
    (400, "detail", "send", errors.BadRequestError),
    (401, "detail", "polls", errors.AuthenticationError),
    (403, "error", "agents", errors.APIError),
    (404, "detail", "status", errors.NotFoundError),
    (410, "error", "legacy", errors.RetiredEndpointError),
    (429, "error", "history", errors.RateLimitError),
    (503, "text", "sessions", errors.ServerError),
    (500, "html", "send", errors.AmbiguousSendError),
    (302, "text", "polls", errors.RedirectError),
    (200, "html", "polls", errors.ResponseError),
    (200, "text", "send", errors.AmbiguousSendError),
    (400, "error", "update", errors.BadRequestError),
]
ECHO_CALLS: dict[str, Callable[[CampaignClient], Awaitable[Any]]] = {
    "send": lambda c: c.send_campaign(1001, USERS),
    "polls": lambda c: c.list_polls(),
    "agents": lambda c: c.list_agents(),
    "status": lambda c: c.get_campaign_status("lr"),
    "legacy": lambda c: _legacy(c, {}, FakeTime()),
    "history": lambda c: c.get_session_history("s"),
    "sessions": lambda c: c.list_sessions(1001),
    "update": lambda c: c.update_session("s", {"plan": "gold"}),
}


def key_material(key: str) -> list[str]:
    """Every 12-character slice of the key, of its percent-encoded form and
    of its base64 forms at each byte alignment: what must never show."""
    forms = [key, quote(key, safe="")]
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + key.encode()).decode().rstrip("=")
        forms.append(encoded[4 if pad else 0 : -4])
    return [form[i : i + 12] for form in forms for i in range(len(form) - 11)]


def assert_no_material(texts: list[str], key: str) -> None:
    assert texts, "nothing was checked"
    parts = key_material(key)
    for text in texts:
        for part in parts:
            assert part not in text, f"key material {part!r} in: {text[:300]!r}"


@pytest.mark.parametrize("echo_kind", sorted(ECHOES))
@pytest.mark.parametrize("key", ECHO_KEYS, ids=["ak", "sk"])
async def test_echoed_keys_never_show_in_any_error_class(
    debug_logs: pytest.LogCaptureFixture, echo_kind: str, key: str
) -> None:
    with pytest.raises(AssertionError):  # the control: the echo does carry the key
        assert_no_material([ECHOES[echo_kind](key)], key)
    texts: list[str] = []
    async with echo_server() as echo:
        echo.echo = echo_kind
        async with CampaignClient(
            key,
            base_url=echo.url,
            campaign_url=echo.url,
            agent_url=echo.url,
            max_retries=0,
            log_bodies=True,  # the DEBUG lines carry the echoed bodies too
        ) as client:
            for status, shape, call, expected in ECHO_CASES:
                echo.status, echo.shape = status, shape
                with pytest.raises(CampaignKitError) as caught:
                    await ECHO_CALLS[call](client)
                assert type(caught.value) is expected, (status, shape, call, caught.value)
                caught.value.add_note(f"while sending with {key}")
                texts += exception_texts(caught.value)
                for name in ("body", "detail", "message", "url"):
                    texts.append(str(getattr(caught.value, name, "")))
    assert echo.seen >= len(ECHO_CASES)
    assert_no_material(texts, key)
    logs = log_texts(debug_logs)
    assert any("***" in line for line in logs)  # an echoed body was logged, masked
    assert_no_material(logs, key)


async def test_a_key_in_a_bad_setting_or_in_bad_input_is_not_echoed() -> None:
    key = ECHO_KEYS[1]
    texts: list[str] = []
    for url in (f"https://h.example/?key={key}", f"ftp://{key}@h.example"):
        with pytest.raises(CampaignKitError) as caught:
            CampaignClient(key, base_url=url)
        texts += exception_texts(caught.value)
    async with CampaignClient(key, campaign_url="https://h.example") as client:
        for user in (
            User(cellphone="1234567", country_code=key),
            User(cellphone=key, country_code="+57"),
            User(cellphone="1234567", country_code="+57", deployment_eta=key),  # type: ignore[arg-type]
        ):
            with pytest.raises(CampaignKitError) as caught:
                await client.send_campaign(1001, [user])
            texts += exception_texts(caught.value)
    assert_no_material(texts, key)


async def test_dashboard_pages_events_and_report_never_show_an_echoed_key(
    tmp_path: Path,
) -> None:
    key = ECHO_KEYS[1]
    async with echo_server() as echo:
        echo.status, echo.shape, echo.echo = 401, "detail", "base64"
        client = CampaignClient(
            key, base_url=echo.url, campaign_url=echo.url, agent_url=echo.url, max_retries=0
        )
        app = dashboard_app(Dashboard(client, launches=["lr"], **DASHBOARD_FAST))
        pages = []
        async with client, serving(app) as url, aiohttp.ClientSession() as http:
            event = await first_event(http, f"{url}/launches/lr/events", "error")
            pages.append(orjson.dumps(event).decode())
            for path in ("/", "/launches/lr", "/launches/lr/report.html"):
                async with http.get(url + path) as response:
                    pages.append(await response.text())
            echo.status, echo.shape, echo.echo = 200, "status", "raw"
            pages.append(orjson.dumps(await first_event(http, f"{url}/events", "")).decode())
            async with http.get(f"{url}/launches/other/report.html") as response:
                assert response.status == 200
                pages.append(await response.text())
            await write_report(client, "lr", tmp_path / "report.html")
            pages.append((tmp_path / "report.html").read_text())
    assert "***" in pages[0]  # the echoes did reach them, masked
    assert "***" in pages[-1]
    assert_no_material(pages, key)


async def first_event(http: aiohttp.ClientSession, url: str, field: str) -> Any:
    """The first server-sent event of ``url`` (with ``field`` set, if given)."""
    async with asyncio.timeout(20), http.get(url) as response:
        async for line in response.content:
            if line.startswith(b"data: "):
                event = orjson.loads(line[6:])
                if not field or event.get(field):
                    return event
    raise AssertionError("the stream ended")


async def test_cli_output_and_report_never_show_an_echoed_key(tmp_path: Path) -> None:
    key = ECHO_KEYS[0]
    outputs = []
    journal = str(tmp_path / "runs.db")
    async with SqliteLedger(journal) as ledger:
        await ledger.start_run("spring", "1")  # its poll's name is the echo
    run_report = ["report", "--run", "spring", "--journal", journal, "-o"]
    async with echo_server() as echo:
        hosts = ["--base-url", echo.url, "--campaign-url", echo.url, "--agent-url", echo.url]
        runs: list[tuple[int, str, str, list[str], int]] = [
            (401, "detail", "cut", ["polls"], 3),
            (500, "html", "middle", ["status", "lr"], 1),
            (503, "text", "base64", ["--json", "agents"], 1),
            (200, "status", "raw", ["--json", "status", "lr"], 0),
            (200, "status", "percent", ["report", "lr", "-o", str(tmp_path / "r.html")], 0),
            (401, "detail", "raw", [*run_report, str(tmp_path / "run-401.html")], 0),
            (200, "status", "raw", [*run_report, str(tmp_path / "run.html")], 0),
        ]
        for status, shape, echo_kind, argv, code in runs:
            echo.status, echo.shape, echo.echo = status, shape, echo_kind
            for debug in (["--debug"], []):
                env = {k: v for k, v in os.environ.items() if not k.startswith("CAMPAIGNKIT_")}
                proc = await asyncio.create_subprocess_exec(
                    str(SCRIPT),
                    *debug,
                    "--max-retries",
                    "0",
                    "--api-key",
                    key,
                    *hosts,
                    *argv,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                )
                out, err = await asyncio.wait_for(proc.communicate(), 30)
                assert proc.returncode == code, (argv, out, err)
                outputs.append(out.decode() + err.decode())
        outputs += [(tmp_path / name).read_text() for name in ("r.html", "run.html")]
    assert any("Traceback" in output for output in outputs)
    assert sum("***" in output for output in outputs) >= len(runs)  # the echoes were masked
    assert_no_material(outputs, key)
