"""The API key never shows: not in logs, exception texts, tracebacks or reprs.
Phone numbers never reach the logs. The redaction core that sees to it
(``campaignkit._redaction``) is tested at the end, with hypothesis.

The service is scripted at the exchange seam; that the aiohttp adapter's own
errors and aiohttp's logs never show the key is in test_aiohttp_exchange."""

from __future__ import annotations

import base64
import json
import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote

import pytest
from helpers.exchange import (
    ScriptedExchange,
    dropped_after_sending,
    sent_before_any_byte,
    timed_out_after_sending,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from campaignkit import (
    AmbiguousSendError,
    APIError,
    CampaignClient,
    CampaignKitError,
    ClientConfig,
    ConfigurationError,
    ConnectionError,
    ResponseError,
    User,
    ValidationError,
    _redaction,
)
from campaignkit._redaction import FRAGMENT, MASK, redact, register, sdk_logger
from campaignkit.testing import FakeTime

KEY = "sk_live_Zq7SECRETxK3y9f8e7d6c5b4a"
PHONE = "3007654321"
BASE = "https://main.example.com"
CAMPAIGN = "https://campaigns.example.com"
AGENTS = "https://agents.example.com"
USERS = [User(cellphone=PHONE, country_code="+57", user_session_keys={"name": "Ana"})]
ACK = {
    "message": "queued",
    "id": "1",
    "batch_id": "b",
    "launch_request_id": "lr",
    "status_url": "/v2/send-campaign/lr",
}


def client_on(exchange: ScriptedExchange) -> CampaignClient:
    """A client with the test key whose every request goes to ``exchange``."""
    return FakeTime().install(
        CampaignClient(
            KEY, base_url=BASE, campaign_url=CAMPAIGN, agent_url=AGENTS, exchange=exchange
        )
    )


def texts_of(exc: BaseException) -> list[str]:
    texts = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    texts += [repr(value) for value in vars(exc).values() if not isinstance(value, tuple)]
    for linked in (exc.__cause__, exc.__context__):
        if linked is not None:
            texts += [str(linked), repr(linked)]
    return texts


def log_texts(caplog: pytest.LogCaptureFixture) -> list[str]:
    out = []
    for record in caplog.records:
        out += [record.getMessage(), repr(record.args), str(record.msg)]
        if record.exc_info and record.exc_info[1] is not None:
            out += texts_of(record.exc_info[1])
    return out


Call = Callable[[CampaignClient], Awaitable[Any]]

CALLS: dict[str, tuple[str, str, Call]] = {
    "send": ("POST", f"{CAMPAIGN}/v2/send-campaign/1", lambda c: c.send_campaign(1, USERS)),
    "status": ("GET", f"{CAMPAIGN}/v2/send-campaign/lr", lambda c: c.get_campaign_status("lr")),
    "update": ("POST", f"{BASE}/session/e/update", lambda c: c.update_session("e", {"a": "b"})),
    "sessions": ("GET", f"{BASE}/devapi/poll/1/sessions", lambda c: c.list_sessions(1)),
    "agents": ("GET", f"{AGENTS}/agent/company/agents", lambda c: c.list_agents()),
    "history": ("GET", f"{BASE}/devapi/session/s/history", lambda c: c.get_session_history("s")),
    "polls": ("GET", f"{BASE}/poll/api/all", lambda c: c.list_polls()),
}

KEY_ERROR = {"detail": "invalid key"}
OUTCOMES: dict[str, dict[str, Any]] = {
    "400": {"status": 400, "payload": {"detail": "bad"}},
    "401": {"status": 401, "payload": KEY_ERROR},
    "404": {"status": 404, "payload": {"error": "nf", "message": "none"}},
    "429": {"status": 429, "headers": {"Retry-After": "1"}},
    "500": {"status": 500, "body": b"<html>oops</html>"},
    "302": {"status": 302, "headers": {"Location": "https://elsewhere.example/"}},
    "html": {"status": 200, "body": b"<html></html>", "headers": {"Content-Type": "text/html"}},
    "shape": {"status": 200, "payload": {"unexpected": True}},
    # What the adapter raises for a dropped connection, a refused one, a timeout:
    "dropped": {"exception": dropped_after_sending},
    "connect": {"exception": sent_before_any_byte},
    "timeout": {"exception": timed_out_after_sending},
}


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)  # root: aiohttp and asyncio records too
    caplog.set_level(logging.DEBUG, logger="campaignkit")
    return caplog


def assert_clean(texts: list[str]) -> None:
    assert texts, "nothing was checked"
    for text in texts:
        assert KEY not in text
        assert KEY[8:20] not in text  # no partial leak either


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
@pytest.mark.parametrize("call", sorted(CALLS))
async def test_errors_and_retries_never_show_the_key(
    debug_logs: pytest.LogCaptureFixture, call: str, outcome: str
) -> None:
    method, url, invoke = CALLS[call]
    mocked = ScriptedExchange()
    options = dict(OUTCOMES[outcome])
    if "exception" in options:
        options["exception"] = options["exception"]()  # a fresh one, no old traceback
    mocked.add(url, method=method, repeat=True, **options)
    async with client_on(mocked) as client:
        with pytest.raises(CampaignKitError) as caught:  # never json's
            await invoke(client)
        assert_clean([repr(client), str(client), repr(client.config)])
    assert len(mocked.requests) >= 1
    assert all(r.headers["Authorization"] == KEY for r in mocked.requests)  # it was there
    assert_clean(texts_of(caught.value))
    logs = log_texts(debug_logs)
    assert any("attempt=" in line for line in logs)  # the DEBUG records were captured
    assert_clean(logs)
    for line in logs:
        assert PHONE not in line


@pytest.mark.parametrize("call", sorted(CALLS))
async def test_successes_log_no_key_and_no_phone(
    debug_logs: pytest.LogCaptureFixture, call: str
) -> None:
    payloads: dict[str, Any] = {
        "send": ACK,
        "status": {
            "launch_request_id": "lr",
            "status": "DONE",
            "poll_id": 1,
            "deployments": [
                {"conversation_id": "c", "service_id": "s", "cellphone": PHONE, "status": "SUCCESS"}
            ],
        },
        "update": {"message": "ok", "session_id": "s"},
        "sessions": {
            "results": [
                {
                    "id": "s",
                    "created_at": "2024-01-01 00:00:00.000000",
                    "user": {"country_code": "+57", "cellphone": PHONE},
                }
            ]
        },
        "agents": [],
        "history": [],
        "polls": [],
    }
    method, url, invoke = CALLS[call]
    mocked = ScriptedExchange()
    mocked.add(url, method=method, payload=payloads[call])
    async with client_on(mocked) as client:
        await invoke(client)
    assert len(mocked.requests) == 1
    logs = log_texts(debug_logs)
    assert any(method in line and "attempt=1" in line for line in logs)
    assert_clean(logs)
    for line in logs:
        assert PHONE not in line


def test_reprs_redact_the_key() -> None:
    config = ClientConfig(KEY, base_url=BASE)
    client = CampaignClient(config=config)
    assert_clean([repr(config), str(config), repr(client), str(client)])
    assert "***" in repr(config)


@pytest.mark.parametrize("bad_key", [KEY + "\n", KEY + "\r\nX: y"])
def test_configuration_errors_do_not_echo_the_key(bad_key: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        CampaignClient(bad_key, base_url=BASE)
    assert_clean(texts_of(caught.value))


async def test_validation_errors_do_not_echo_the_key() -> None:
    async with CampaignClient(KEY, base_url=BASE, campaign_url=CAMPAIGN) as client:
        with pytest.raises(ValueError, match="users") as caught:
            await client.send_campaign(1, [User(cellphone="x", country_code="y")])
    assert_clean(texts_of(caught.value))


# -- the redaction core (campaignkit._redaction) -----------------------------


@pytest.fixture
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys a test registers are forgotten after it: random keys such as
    ``000000000000000000`` would otherwise mask text in later tests."""
    monkeypatch.setattr(_redaction, "_keys", set(_redaction._keys))
    monkeypatch.setattr(_redaction, "_index", _redaction._index)


key_chars = st.characters(codec="ascii", categories=["L", "N"]) | st.sampled_from("_-")
keys = st.text(key_chars, min_size=20, max_size=64)
around = st.text(max_size=40)


def fragments(key: str, size: int = FRAGMENT) -> list[str]:
    return [key[i : i + size] for i in range(len(key) - size + 1)]


@pytest.mark.usefixtures("own_registry")
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=keys, before=around, after=around, start=st.integers(0, 50), size=st.integers(12, 64))
def test_no_run_of_12_characters_of_a_registered_key_survives(
    key: str, before: str, after: str, start: int, size: int
) -> None:
    register(key)
    piece = key[start : start + size]
    assume(len(piece) >= FRAGMENT)
    for text in (before + piece + after, piece, before + key + after + key):
        redacted = redact(text)
        assert not any(part in redacted for part in fragments(key)), (text, redacted)
        assert MASK in redacted


@pytest.mark.usefixtures("own_registry")
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=keys, text=st.text(max_size=200))
def test_text_without_key_material_is_left_as_it_is(key: str, text: str) -> None:
    register(key)
    assume(not any(part in text for part in fragments(key)) and "ak_" not in text)
    others = [part for other in _redaction._keys for part in fragments(other, min(12, len(other)))]
    assume(not any(part in text for part in others))
    assert redact(text) == text


@pytest.mark.usefixtures("own_registry")
@pytest.mark.parametrize(
    "encode",
    [
        lambda k: quote(k, safe=""),
        lambda k: base64.b64encode(k.encode()).decode(),
        lambda k: base64.b64encode(f"u:{k}".encode()).decode(),
        lambda k: base64.urlsafe_b64encode(f"ab{k}".encode()).decode(),
    ],
    ids=["percent", "base64", "basic-auth", "urlsafe-shifted"],
)
def test_encoded_forms_of_the_key_are_masked(encode: Callable[[str], str]) -> None:
    key = "sk_live_+/=Zq7SECRET/xK3y9f8e7d6c5b4a"
    register(key)
    encoded = encode(key)
    redacted = redact(f"header was {encoded}!")
    assert MASK in redacted
    core = encoded[8:-8]  # what depends on the key alone, whatever is around it
    assert core not in redacted


def json_escapes(char: str) -> list[str]:
    """Every way a JSON encoder may write ``char`` inside a string."""
    code = ord(char)
    if code > 0xFFFF:  # a surrogate pair, each half in either case
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        return [f"\\u{high:04x}\\u{low:04x}", f"\\u{high:04X}\\u{low:04X}", char]
    forms = [f"\\u{code:04x}", f"\\u{code:04X}"]
    short = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\b": "\\b", "\f": "\\f", "\n": "\\n"}
    short |= {"\r": "\\r", "\t": "\\t"}
    if char in short:
        forms.append(short[char])
    if char not in '"\\' and code >= 0x20:
        forms.append(char)
    return forms


any_key_chars = st.characters(codec="utf-8", exclude_categories=["Cs"])


@pytest.mark.usefixtures("own_registry")
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(key=keys | st.text(any_key_chars, min_size=20, max_size=40), data=st.data())
def test_a_key_echoed_with_json_escapes_is_not_readable_back(key: str, data: st.DataObject) -> None:
    register(key)
    spelled = "".join(data.draw(st.sampled_from(json_escapes(char))) for char in key)
    body = f'{{"detail": "bad header Authorization: {spelled}", "n": 1}}'
    assert json.loads(body)["detail"].endswith(key)  # the body spells the key
    redacted = json.loads(redact(body))
    assert redacted["n"] == 1
    assert not any(part in redacted["detail"] for part in fragments(key)), (body, redacted)
    assert MASK in redacted["detail"]


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_a_key_shaped_token_is_masked_in_json_escapes(ensure_ascii: bool) -> None:
    token = "ak_" + "N0tRegisteredAnywhere1234567890ab"
    body = json.dumps({"detail": f"bad {token}"}, ensure_ascii=ensure_ascii)
    escaped = body.replace("ak_", "\\u0061k\\u005f")
    assert json.loads(redact(escaped)) == {"detail": f"bad {MASK}"}


def test_a_key_shaped_token_is_masked_even_unregistered() -> None:
    token = "ak_" + "N0tRegisteredAnywhere1234567890ab"
    assert redact(f'{{"detail": "bad header Authorization: {token}"}}') == (
        '{"detail": "bad header Authorization: ***"}'
    )
    not_a_token = "hack_this_is_not_a_key_at_all_but_long"
    assert redact(not_a_token) == not_a_token


def test_errors_are_redacted_when_built_and_when_noted() -> None:
    register(KEY)
    echoed = f"bad header Authorization: {KEY}"
    exc = APIError(401, "GET", f"{BASE}/x?k={KEY}", echoed, detail=echoed, message=KEY[3:30])
    exc.add_note(f"while using {KEY}")
    others = [
        ResponseError(echoed, path="$.x"),
        AmbiguousSendError(echoed, cause=exc),
        ValidationError([("users[0].country_code", f"got {KEY!r}")]),
        ConnectionError(echoed, request_sent=True),
    ]
    texts = [*texts_of(exc), str(exc.body), str(exc.detail), str(exc.message), str(exc.url)]
    texts += [text for other in others for text in texts_of(other)]
    texts.append("".join(traceback.format_exception(exc)))
    assert_clean(texts)
    assert "while using ***" in exc.__notes__


def test_the_sdk_loggers_redact_messages_arguments_tracebacks_and_stacks(
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    register(KEY)
    logger = sdk_logger("campaignkit.test_secrets")
    try:
        raise RuntimeError(f"a foreign error quoting {KEY}")
    except RuntimeError:
        logger.exception("answer %s from %r", f"Authorization: {KEY}", {"k": KEY}, stack_info=True)
    logger.debug(f"a message built beforehand: {KEY[2:40]}")
    [first, second] = [r for r in debug_logs.records if r.name == "campaignkit.test_secrets"]
    handler_text = logging.Formatter().format(first)  # as any handler formats it
    assert "Traceback" in handler_text
    assert "Stack (most recent call last)" in handler_text
    assert_clean([handler_text, first.getMessage(), second.getMessage(), repr(first.args)])
    assert sdk_logger("campaignkit.test_secrets").filters == logger.filters  # added once


@pytest.mark.usefixtures("own_registry")
def test_default_headers_that_look_secret_are_redacted_like_the_key() -> None:
    gateway, source = "gw_live_9fK2mQ7xZ4pL1sT8", "campaign-manager-nightly-job"
    ClientConfig(KEY, default_headers={"X-Gateway-Key": gateway, "X-Request-Source": source})
    assert redact(f"rejected {gateway} from {source}") == f"rejected *** from {source}"
