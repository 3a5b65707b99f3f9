"""Secret audit against the real sandbox (tests/test_secrets.py does the same
with mocked answers): with DEBUG logging on the root logger, every call, every
error path and every retry, the tracker and send_bulk under every fault kind.
The API key never shows in logs, exception texts, tracebacks (with their
chains), reprs or the CLI's ``--debug`` output; phone numbers never reach the
logs; ``Authorization`` never goes to a host other than the configured ones.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import traceback
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from helpers.fakes import FakeTime
from helpers.servers import serving

from campaignkit import CampaignClient, CampaignKitError, RetryPolicy, User
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)

SCRIPT = Path(sys.executable).with_name("campaignkit")
USERS = [User(cellphone=f"55200{n}4321", country_code="+52") for n in range(3)]
PHONES = [user.cellphone for user in USERS]
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
    secret = key.removeprefix("sk_test_")
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
