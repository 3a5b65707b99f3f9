"""The wire layer without I/O: request building, path segments, answers, Retry-After."""

from __future__ import annotations

import gc
import platform
import re
import time
import weakref
from datetime import UTC, datetime
from email.utils import format_datetime

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDictProxy

import campaignkit
from campaignkit import errors
from campaignkit._input.validation import encoded_segment, path_segment
from campaignkit._wire import sansio as wire
from campaignkit.config import ClientConfig
from campaignkit.models import CampaignAck, Poll

KEY = "sk_tst_wire_0123456789"


def make_config(**overrides: object) -> ClientConfig:
    settings_: dict[str, object] = {
        "base_url": "https://main.example.com/api/",
        "campaign_url": "https://campaigns.example.com",
        "agent_url": "http://agents.example.com:8080/v9",
    }
    settings_.update(overrides)
    return ClientConfig(KEY, **settings_)  # type: ignore[arg-type]


CONFIG = make_config()


@pytest.mark.parametrize(
    ("endpoint", "params", "method", "url"),
    [
        (
            wire.SEND_CAMPAIGN,
            {"poll_id": "12"},
            "POST",
            "https://campaigns.example.com/v2/send-campaign/12",
        ),
        (
            wire.CAMPAIGN_STATUS,
            {"launch_request_id": "lr-1"},
            "GET",
            "https://campaigns.example.com/v2/send-campaign/lr-1",
        ),
        (
            wire.UPDATE_SESSION,
            {"session_external_id": "ext9"},
            "POST",
            "https://main.example.com/api/session/ext9/update",
        ),
        (
            wire.LIST_SESSIONS,
            {"poll_id": "12"},
            "GET",
            "https://main.example.com/api/devapi/poll/12/sessions",
        ),
        (wire.LIST_AGENTS, {}, "GET", "http://agents.example.com:8080/v9/agent/company/agents"),
        (
            wire.DEPLOY_LEGACY,
            {"poll_id": "12"},
            "POST",
            "https://main.example.com/api/deployment/api/poll/12",
        ),
        (
            wire.SESSION_HISTORY,
            {"session_id": "s1"},
            "GET",
            "https://main.example.com/api/devapi/session/s1/history",
        ),
        (wire.LIST_POLLS, {}, "GET", "https://main.example.com/api/poll/api/all"),
    ],
)
def test_each_endpoint_builds_method_host_and_prefixed_path(
    endpoint: wire.Endpoint, params: dict[str, str], method: str, url: str
) -> None:
    request = wire.build_request(CONFIG, endpoint, path_params=params)
    assert request.endpoint.method == method
    assert request.url == url
    assert request.body is None
    assert "Content-Type" not in request.headers


def test_sends_are_marked_and_reads_are_not() -> None:
    sends = {
        e.name
        for e in (
            wire.SEND_CAMPAIGN,
            wire.UPDATE_SESSION,
            wire.DEPLOY_LEGACY,
            wire.CAMPAIGN_STATUS,
            wire.LIST_SESSIONS,
            wire.LIST_AGENTS,
            wire.SESSION_HISTORY,
            wire.LIST_POLLS,
        )
        if e.is_send
    }
    assert sends == {"send_campaign", "update_session", "deploy_legacy"}


def test_headers_carry_raw_key_user_agent_and_json_body_bytes() -> None:
    request = wire.build_request(
        CONFIG,
        wire.SEND_CAMPAIGN,
        path_params={"poll_id": "7"},
        json={
            "users": [
                {
                    "cellphone": "3001234567",
                    "country_code": "+57",
                    "user_session_keys": [{"key": "name", "value": "Añá"}],
                }
            ]
        },
    )
    assert request.headers["Authorization"] == KEY
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Accept"] == "application/json"
    assert request.body == (
        b'{"users":[{"cellphone":"3001234567","country_code":"+57",'
        b'"user_session_keys":[{"key":"name","value":"A\xc3\xb1\xc3\xa1"}]}]}'
    )
    user_agent = request.headers["User-Agent"]
    match = re.fullmatch(r"campaignkit/(\S+) python/(\S+) aiohttp/(\S+)", user_agent)
    assert match is not None
    assert match.groups() == (
        campaignkit.__version__,
        platform.python_version(),
        aiohttp.__version__,
    )


def test_auth_header_and_scheme_are_overridable() -> None:
    config = make_config(auth_header="X-Api-Key", auth_scheme="Bearer")
    request = wire.build_request(config, wire.LIST_POLLS)
    assert request.headers["X-Api-Key"] == f"Bearer {KEY}"
    assert "Authorization" not in request.headers


def test_request_repr_hides_headers_and_body() -> None:
    request = wire.build_request(CONFIG, wire.LIST_POLLS, json={"secret": "body"})
    assert KEY not in repr(request)
    assert "body" not in repr(request).replace("endpoint", "")


def test_query_is_urlencoded() -> None:
    request = wire.build_request(
        CONFIG,
        wire.LIST_SESSIONS,
        path_params={"poll_id": "3"},
        query={"start": 10, "next_id": "a&b=c d"},
    )
    assert request.url == (
        "https://main.example.com/api/devapi/poll/3/sessions?start=10&next_id=a%26b%3Dc+d"
    )


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("../admin", "..%2Fadmin"),
        ("a?x=1", "a%3Fx%3D1"),
        ("a#frag", "a%23frag"),
        ("a/b", "a%2Fb"),
        ("50%", "50%25"),
        ("%2e%2e", "%252e%252e"),
        ("ñandú", "%C3%B1and%C3%BA"),
        ("a b", "a%20b"),
        ("...", "..."),
        (42, "42"),
    ],
)
def test_path_segment_is_one_encoded_segment(value: object, encoded: str) -> None:
    problems: list[tuple[str, str]] = []
    assert path_segment("poll_id", value, problems) == encoded
    assert problems == []
    request = wire.build_request(CONFIG, wire.SEND_CAMPAIGN, path_params={"poll_id": encoded})
    assert request.url == f"https://campaigns.example.com/v2/send-campaign/{encoded}"


@pytest.mark.parametrize(
    "value", ["", ".", "..", "a\nb", "a\x00", "\x7f", "\ud800", "\ud800\n", None, 1.5, True]
)
def test_path_segment_refuses_what_could_change_the_target(value: object) -> None:
    problems: list[tuple[str, str]] = []
    path_segment("session_id", value, problems)
    assert [path for path, _ in problems] == ["session_id"]


@given(st.text())
@settings(max_examples=200, deadline=None)
def test_any_text_stays_in_its_segment(value: str) -> None:
    problems: list[tuple[str, str]] = []
    segment = path_segment("poll_id", value, problems)
    if problems:
        return
    assert re.fullmatch(r"[A-Za-z0-9_.~%-]+", segment)
    assert segment not in (".", "..")


SEGMENT_VALUES = st.one_of(
    st.text(),
    st.text(alphabet="aZ09._~-/% \n\x7fé"),
    st.integers(),
    st.sampled_from([None, True, 1.5, b"L1"]),
)


@given(SEGMENT_VALUES)
@settings(max_examples=300, deadline=None)
def test_the_shortcut_for_plain_ids_agrees_with_every_check(value: object) -> None:
    shortcut: list[tuple[str, str]] = []
    checked: list[tuple[str, str]] = []
    assert path_segment("poll_id", value, shortcut) == encoded_segment("poll_id", value, checked)
    assert shortcut == checked


@pytest.mark.parametrize(
    ("endpoint", "params", "json"),
    [
        (wire.LIST_POLLS, None, None),
        (wire.CAMPAIGN_STATUS, {"launch_request_id": "L1"}, None),
        (wire.SEND_CAMPAIGN, {"poll_id": "5"}, {"users": []}),
        (wire.UPDATE_SESSION, {"session_external_id": "e"}, {"user_session_keys": []}),
    ],
)
def test_headers_made_once_per_config_are_the_general_ones(
    endpoint: wire.Endpoint, params: dict[str, str] | None, json: object
) -> None:
    for config in (CONFIG, make_config(authorize_session_update=False, default_headers={"X": "1"})):
        first = wire.build_request(config, endpoint, path_params=params, json=json)
        again = wire.build_request(config, endpoint, path_params=params, json=json)
        assert first.headers is again.headers
        assert first.headers == wire.request_headers(config, endpoint, None, json is not None)


def test_each_config_has_its_own_headers_and_none_is_kept_alive() -> None:
    config = ClientConfig("sk_other_key_0123", base_url="https://other.example.com")
    request = wire.build_request(config, wire.LIST_POLLS)
    assert request.headers["Authorization"] == "sk_other_key_0123"
    assert request.url == "https://other.example.com/poll/api/all"
    assert wire.build_request(CONFIG, wire.LIST_POLLS).headers["Authorization"] == KEY
    gone = weakref.ref(config)
    del config, request
    gc.collect()
    assert gone() is None


def test_an_unconfigured_host_is_refused_at_every_request() -> None:
    config = ClientConfig(KEY, campaign_url="https://campaigns.example.com")
    for _ in range(2):
        with pytest.raises(errors.ConfigurationError, match="base_url is not configured"):
            wire.build_request(config, wire.LIST_POLLS)


def test_extra_headers_replace_defaults_whatever_their_case() -> None:
    request = wire.build_request(CONFIG, wire.LIST_POLLS, extra_headers={"accept": "text/csv"})
    assert isinstance(request.headers, CIMultiDictProxy)
    assert request.headers.getall("Accept") == ["text/csv"]
    assert request.headers["Authorization"] == KEY


def test_an_endpoint_path_has_at_most_one_parameter() -> None:
    with pytest.raises(ValueError, match="at most one parameter"):
        wire.Endpoint("two", "GET", "base_url", "/a/{b}/{c}")
    renamed = wire.Endpoint("list_polls", "GET", "base_url", "/v2/polls")
    assert wire.build_request(CONFIG, renamed).url == "https://main.example.com/api/v2/polls"


# -- answers ------------------------------------------------------------------

CAMPAIGN_REQUEST = wire.build_request(CONFIG, wire.SEND_CAMPAIGN, path_params={"poll_id": "5"})
STATUS_REQUEST = wire.build_request(
    CONFIG, wire.CAMPAIGN_STATUS, path_params={"launch_request_id": "lr"}
)
POLLS_REQUEST = wire.build_request(CONFIG, wire.LIST_POLLS)
LEGACY_REQUEST = wire.build_request(CONFIG, wire.DEPLOY_LEGACY, path_params={"poll_id": "5"})
JSON = {"Content-Type": "application/json"}


def read(
    request: wire.Request,
    status: int,
    body: bytes,
    headers: dict[str, str] | None = None,
    cls: type = Poll,
) -> object:
    return wire.read_response(request, status, headers or JSON, body, wire.decoder(cls))


def test_success_decodes_the_model() -> None:
    ack = read(
        CAMPAIGN_REQUEST,
        202,
        b'{"message":"queued","id":"5","batch_id":"b",'
        b'"launch_request_id":"lr","status_url":"/v2/send-campaign/lr","x":1}',
        cls=CampaignAck,
    )
    assert ack == CampaignAck("queued", "5", "b", "lr", "/v2/send-campaign/lr")


@pytest.mark.parametrize(
    ("request_", "status", "cls"),
    [
        (CAMPAIGN_REQUEST, 400, errors.BadRequestError),
        (CAMPAIGN_REQUEST, 401, errors.AuthenticationError),
        (CAMPAIGN_REQUEST, 404, errors.NotFoundError),
        (STATUS_REQUEST, 404, errors.NotFoundError),
    ],
)
def test_detail_errors_of_the_spec_table(
    request_: wire.Request, status: int, cls: type[errors.APIError]
) -> None:
    with pytest.raises(cls) as caught:
        read(request_, status, b'{"detail":"Poll id is required in the URL or body"}')
    exc = caught.value
    assert type(exc) is cls
    assert exc.status == status
    assert exc.method == request_.endpoint.method
    assert exc.url == request_.url
    assert exc.detail == "Poll id is required in the URL or body"
    assert exc.error is None
    assert exc.message is None
    assert "Poll id is required" in str(exc)


def test_spanish_detail_is_kept_as_sent() -> None:
    detail = "No se encontró la solicitud de lanzamiento con este identificador"
    with pytest.raises(errors.NotFoundError) as caught:
        read(STATUS_REQUEST, 404, b'{"detail":"' + detail.encode() + b'"}')
    assert caught.value.detail == detail
    assert detail in str(caught.value)


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, errors.BadRequestError),
        (401, errors.AuthenticationError),
        (404, errors.NotFoundError),
        (403, errors.APIError),
        (422, errors.APIError),
        (410, errors.APIError),
        (500, errors.ServerError),
        (429, errors.RateLimitError),
    ],
)
def test_error_message_shape(status: int, cls: type[errors.APIError]) -> None:
    with pytest.raises(errors.APIError) as caught:
        read(POLLS_REQUEST, status, b'{"error":"not_allowed","message":"Company inactive"}')
    assert type(caught.value) is cls
    assert (caught.value.error, caught.value.message) == ("not_allowed", "Company inactive")
    assert caught.value.detail is None
    assert "not_allowed: Company inactive" in str(caught.value)


@pytest.mark.parametrize("status", [404, 410])
def test_legacy_404_and_410_are_retired(status: int) -> None:
    with pytest.raises(errors.RetiredEndpointError, match="use send_campaign"):
        read(LEGACY_REQUEST, status, b'{"error":"gone","message":"gone"}')


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_redirects_are_errors(status: int) -> None:
    with pytest.raises(errors.RedirectError, match="not followed"):
        read(POLLS_REQUEST, status, b"", {"Location": "https://elsewhere.example/"})


def test_error_url_has_no_query() -> None:
    request = wire.build_request(
        CONFIG, wire.LIST_SESSIONS, path_params={"poll_id": "1"}, query={"next_id": "abc"}
    )
    with pytest.raises(errors.APIError) as caught:
        read(request, 400, b"{}")
    assert caught.value.url == "https://main.example.com/api/devapi/poll/1/sessions"


HTML = b"<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>"


def test_html_success_body_is_a_response_error() -> None:
    with pytest.raises(errors.ResponseError, match="HTML") as caught:
        read(POLLS_REQUEST, 200, HTML, {"Content-Type": "text/html"})
    assert caught.value.status == 200


def test_html_error_body_keeps_the_status_class() -> None:
    with pytest.raises(errors.ServerError) as caught:
        read(POLLS_REQUEST, 502, HTML, {"Content-Type": "text/html"})
    assert caught.value.status == 502
    assert caught.value.detail is None
    assert caught.value.error is None
    assert caught.value.body == HTML.decode()


@pytest.mark.parametrize("body", [b'{"message":"queued","id":"5","batch', b"[{", b"nul"])
def test_truncated_bodies_are_response_errors(body: bytes) -> None:
    with pytest.raises(errors.ResponseError, match="not JSON"):
        read(CAMPAIGN_REQUEST, 202, body, cls=CampaignAck)


def test_empty_success_body() -> None:
    with pytest.raises(errors.ResponseError, match="empty body"):
        read(POLLS_REQUEST, 200, b"", cls=list[Poll])


def test_empty_error_body() -> None:
    with pytest.raises(errors.NotFoundError, match="empty body") as caught:
        read(STATUS_REQUEST, 404, b"", {})
    assert caught.value.body == ""


def test_wrong_shape_names_the_path() -> None:
    with pytest.raises(errors.ResponseError) as caught:
        read(POLLS_REQUEST, 200, b'[{"id":1,"name":"a"},{"id":"2","name":"b"}]', cls=list[Poll])
    assert caught.value.path == "$[1].id"


# -- Retry-After ----------------------------------------------------------------


@pytest.mark.parametrize(("value", "seconds"), [("7", 7.0), (" 120 ", 120.0), ("0", 0.0)])
def test_retry_after_seconds(value: str, seconds: float) -> None:
    assert wire.parse_retry_after(value) == seconds


def test_retry_after_http_date() -> None:
    when = datetime(2030, 5, 6, 7, 8, 9, tzinfo=UTC)
    value = format_datetime(when, usegmt=True)
    assert wire.parse_retry_after(value, now=when.timestamp() - 42) == pytest.approx(42.0)
    assert wire.parse_retry_after(value, now=when.timestamp() + 42) == 0.0


@pytest.mark.parametrize("value", [None, "", "soon", "nan", "Mon, 99 Foo 2020"])
def test_retry_after_unreadable(value: str | None) -> None:
    assert wire.parse_retry_after(value) is None


def test_retry_after_header_lookup_is_case_insensitive() -> None:
    with pytest.raises(errors.RateLimitError) as caught:
        read(POLLS_REQUEST, 429, b"{}", {"retry-after": "3"})
    assert caught.value.retry_after == 3.0


def test_rate_limit_and_server_errors_carry_retry_after() -> None:
    with pytest.raises(errors.ServerError) as caught:
        read(POLLS_REQUEST, 503, b"", {"Retry-After": "11"})
    assert caught.value.retry_after == 11.0


@given(st.text())
@settings(max_examples=200, deadline=None)
def test_retry_after_never_raises(value: str) -> None:
    seconds = wire.parse_retry_after(value)
    assert seconds is None or seconds >= 0


# -- boundaries (tests/review: test-strength 2026-11-28) -------------------------


def test_an_http_date_retry_after_is_read_against_the_clock() -> None:
    when = format_datetime(datetime.fromtimestamp(time.time() + 120, UTC), usegmt=True)
    error = wire.error_for(POLLS_REQUEST, 429, {"Retry-After": when}, b"{}")
    assert isinstance(error, errors.RateLimitError)
    assert error.retry_after is not None
    assert 100 < error.retry_after <= 120


@pytest.mark.parametrize(
    ("request_", "status", "cls"),
    [
        (POLLS_REQUEST, 300, errors.RedirectError),
        (POLLS_REQUEST, 302, errors.RedirectError),
        (POLLS_REQUEST, 399, errors.RedirectError),
        (POLLS_REQUEST, 429, errors.RateLimitError),
        (POLLS_REQUEST, 503, errors.ServerError),
        (LEGACY_REQUEST, 404, errors.RetiredEndpointError),
        (LEGACY_REQUEST, 410, errors.RetiredEndpointError),
        (POLLS_REQUEST, 199, errors.APIError),
    ],
)
def test_every_typed_error_keeps_status_method_url_and_fields(
    request_: wire.Request, status: int, cls: type[errors.APIError]
) -> None:
    with pytest.raises(errors.APIError) as caught:
        read(request_, status, b'{"detail":"nope","error":"e1","message":"m1"}')
    error = caught.value
    assert type(error) is cls
    assert (error.status, error.method, error.url) == (
        status,
        request_.endpoint.method,
        request_.url,
    )
    assert (error.detail, error.error, error.message) == ("nope", "e1", "m1")


@pytest.mark.parametrize("status", [200, 299])
def test_the_2xx_bounds_decode(status: int) -> None:
    assert read(POLLS_REQUEST, status, b'[{"id":1,"name":"a"}]', cls=list[Poll]) == [Poll(1, "a")]


def test_error_fields_that_are_not_text_are_none() -> None:
    body = b'{"detail":[{"loc":["body"],"msg":"bad"}],"error":["not","text"],"message":5}'
    with pytest.raises(errors.BadRequestError) as caught:
        read(POLLS_REQUEST, 400, body)
    assert (caught.value.detail, caught.value.error, caught.value.message) == (None, None, None)


@pytest.mark.parametrize("authorize_session_update", [True, False])
def test_extra_headers_keep_the_content_type_only_with_a_body(
    authorize_session_update: bool,
) -> None:
    config = make_config(authorize_session_update=authorize_session_update)
    extra = {"X-Team": "ops"}
    post = wire.build_request(
        config, wire.SEND_CAMPAIGN, path_params={"poll_id": "5"}, json={}, extra_headers=extra
    )
    get = wire.build_request(config, wire.LIST_POLLS, extra_headers=extra)
    update = wire.build_request(
        config,
        wire.UPDATE_SESSION,
        path_params={"session_external_id": "e"},
        json={},
        extra_headers=extra,
    )
    assert post.headers["Content-Type"] == "application/json"
    assert "Content-Type" not in get.headers
    assert update.headers["Content-Type"] == "application/json"
    for request in (post, get, update):
        assert request.headers["X-Team"] == "ops"
    assert post.headers["Authorization"] == get.headers["Authorization"] == KEY
    assert ("Authorization" in update.headers) is authorize_session_update


@pytest.mark.parametrize("authorize_session_update", [True, False])
def test_the_status_url_request_has_the_key_and_no_content_type(
    authorize_session_update: bool,
) -> None:
    config = make_config(authorize_session_update=authorize_session_update)
    url = "https://campaigns.example.com/v2/send-campaign/lr-1"
    request = wire.build_request_to_url(config, wire.CAMPAIGN_STATUS, url)
    assert (request.url, request.body) == (url, None)
    assert request.headers["Authorization"] == KEY
    assert "Content-Type" not in request.headers


def test_a_dead_configs_shared_requests_are_dropped() -> None:
    config = make_config()
    wire.build_request(config, wire.LIST_POLLS)
    key = id(config)
    assert key in wire._SHARED
    del config
    gc.collect()
    assert key not in wire._SHARED
