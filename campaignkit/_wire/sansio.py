"""The wire layer, without I/O: builds each request and reads each answer.

``build_request`` turns validated call arguments into a :class:`Request`
(method, URL, headers, JSON bytes); ``read_response`` turns an answer (status,
headers, bytes) into a model or a typed error. The transport only moves bytes.
"""

from __future__ import annotations

import email.utils
import importlib.metadata
import platform
import time
import weakref
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import urlencode

import attrs
import orjson
from multidict import CIMultiDict, CIMultiDictProxy, istr

from .. import errors
from .._version import __version__
from ..config import ClientConfig
from ..models import User
from .decode import Decode as Decode
from .decode import decoder as decoder
from .status_url import resolve_status_url as resolve_status_url

T = TypeVar("T")

# The adapter's version is read from the installed metadata: the wire layer
# names aiohttp without importing it.
USER_AGENT = (
    f"campaignkit/{__version__} python/{platform.python_version()} "
    f"aiohttp/{importlib.metadata.version('aiohttp')}"
)
ERROR_BODY_CHARS = 2000


def _split_path(endpoint: Endpoint) -> tuple[str, str, str]:
    """``(before, name, after)`` of the path's parameter (``name`` empty if none)."""
    head, _, rest = endpoint.path.partition("{")
    name, _, tail = rest.partition("}")
    if "{" in tail:
        raise ValueError(f"{endpoint.name}: a path has at most one parameter")
    return head, name, tail


@attrs.frozen
class Endpoint:
    """One operation of the spec: its host, method and path template.

    ``is_send`` marks the operations that message people (or change a
    session): they are never resent after an ambiguous failure.
    ``key_optional`` marks the one the spec shows without a credential.
    """

    name: str
    method: str
    host: str
    path: str
    is_send: bool = False
    retired_on_404: bool = False
    key_optional: bool = False
    # The path around its one parameter, split once, so that a request's URL
    # is joined rather than formatted (benchmarks row 3).
    _path_parts: tuple[str, str, str] = attrs.field(
        init=False, repr=False, eq=False, default=attrs.Factory(_split_path, takes_self=True)
    )


SEND_CAMPAIGN = Endpoint(
    "send_campaign", "POST", "campaign_url", "/v2/send-campaign/{poll_id}", is_send=True
)
CAMPAIGN_STATUS = Endpoint(
    "campaign_status", "GET", "campaign_url", "/v2/send-campaign/{launch_request_id}"
)
UPDATE_SESSION = Endpoint(
    "update_session",
    "POST",
    "base_url",
    "/session/{session_external_id}/update",
    is_send=True,
    key_optional=True,  # the spec shows no Authorization header here
)
LIST_SESSIONS = Endpoint("list_sessions", "GET", "base_url", "/devapi/poll/{poll_id}/sessions")
LIST_AGENTS = Endpoint("list_agents", "GET", "agent_url", "/agent/company/agents")
DEPLOY_LEGACY = Endpoint(
    "deploy_legacy",
    "POST",
    "base_url",
    "/deployment/api/poll/{poll_id}",
    is_send=True,
    retired_on_404=True,
)
SESSION_HISTORY = Endpoint(
    "session_history", "GET", "base_url", "/devapi/session/{session_id}/history"
)
LIST_POLLS = Endpoint("list_polls", "GET", "base_url", "/poll/api/all")


@attrs.frozen
class Request:
    """A request ready to be sent. ``headers`` (which hold the key) stay out of
    the repr; ``users`` are kept for :class:`AmbiguousSendError`."""

    endpoint: Endpoint
    url: str
    headers: Mapping[str, str] = attrs.field(repr=False)
    body: bytes | None = attrs.field(default=None, repr=False)
    users: tuple[User, ...] = attrs.field(default=(), repr=False)


def build_request(
    config: ClientConfig,
    endpoint: Endpoint,
    *,
    path_params: Mapping[str, str] | None = None,
    query: Mapping[str, str | int] | None = None,
    json: Any = None,
    users: tuple[User, ...] = (),
    extra_headers: Mapping[str, str] | None = None,
) -> Request:
    """A request to ``endpoint``; path parameters must be encoded already,
    ``extra_headers`` checked."""
    shared = _shared(config, endpoint)
    head, name, tail = shared.url
    url = head + (path_params or {})[name] + tail if name else head
    if query:
        url = f"{url}?{urlencode(query)}"
    if extra_headers:
        headers = request_headers(config, endpoint, extra_headers, json is not None)
    else:
        headers = shared.headers if json is None else shared.json_headers
    body = None if json is None else orjson.dumps(json)
    return Request(endpoint, url, headers, body, users)


def build_request_to_url(config: ClientConfig, endpoint: Endpoint, url: str) -> Request:
    """A bodiless request to an already-built URL (the tracker's ``status_url``)."""
    return Request(endpoint, url, request_headers(config, endpoint, None, False))


_ACCEPT, _USER_AGENT, _CONTENT_TYPE = istr("Accept"), istr("User-Agent"), istr("Content-Type")


def request_headers(
    config: ClientConfig,
    endpoint: Endpoint,
    extra_headers: Mapping[str, str] | None,
    has_json: bool,
) -> CIMultiDictProxy[str]:
    """The defaults, the config's default headers, then the call's extra ones,
    then the key: names of ``istr``, in a ``CIMultiDictProxy``, which aiohttp
    takes as they are (a plain dict is copied and each name converted)."""
    headers = CIMultiDict([(_ACCEPT, "application/json"), (_USER_AGENT, USER_AGENT)])
    headers.update((istr(name), value) for name, value in config.default_headers)
    if extra_headers:
        headers.update((istr(name), value) for name, value in extra_headers.items())
    if config.authorize_session_update or not endpoint.key_optional:
        headers[istr(config.auth_header)] = config.authorization
    if has_json:
        headers[_CONTENT_TYPE] = "application/json"
    return CIMultiDictProxy(headers)


@attrs.frozen
class _Shared:
    """What every request to one endpoint with one config shares: its URL
    around the path parameter, its headers without and with a JSON body."""

    endpoint: Endpoint
    url: tuple[str, str, str]
    headers: CIMultiDictProxy[str]
    json_headers: CIMultiDictProxy[str]


# Per config (by identity, while it lives), per endpoint name: made at the
# first request, not at every one (benchmarks row 3: the headers and the URL
# were ~8,000 instructions of a small call's ~440,000).
_SHARED: dict[int, tuple[weakref.ref[ClientConfig], dict[str, _Shared]]] = {}


def _shared(config: ClientConfig, endpoint: Endpoint) -> _Shared:
    entry = _SHARED.get(id(config))
    if entry is None or entry[0]() is not config:
        entry = _SHARED[id(config)] = (weakref.ref(config), {})
        weakref.finalize(config, _SHARED.pop, id(config), None)
    shared = entry[1].get(endpoint.name)
    if shared is None or shared.endpoint is not endpoint:
        head, name, tail = endpoint._path_parts
        shared = entry[1][endpoint.name] = _Shared(
            endpoint,
            (config.host(endpoint.host) + head, name, tail),
            request_headers(config, endpoint, None, False),
            request_headers(config, endpoint, None, True),
        )
    return shared


def read_response(
    request: Request,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    decode: Decode[T],
) -> T:
    """The decoded answer to ``request``, or the typed error it stands for."""
    if 200 <= status < 300:
        return decode(body, status, headers)
    raise error_for(request, status, headers, body)


def error_for(
    request: Request, status: int, headers: Mapping[str, str], body: bytes
) -> errors.CampaignKitError:
    """The typed error for a non-2xx answer."""
    text = body[:ERROR_BODY_CHARS].decode("utf-8", "replace")
    fields = _error_fields(body)
    method, url = request.endpoint.method, _without_query(request.url)
    if 300 <= status < 400:
        return errors.RedirectError(status, method, url, text, **fields)
    retry_after = parse_retry_after(_case_insensitive(headers).get("Retry-After"))
    if status == 429:
        return errors.RateLimitError(status, method, url, text, retry_after=retry_after, **fields)
    if status >= 500:
        return errors.ServerError(status, method, url, text, retry_after=retry_after, **fields)
    if request.endpoint.retired_on_404 and status in (404, 410):
        return errors.RetiredEndpointError(status, method, url, text, **fields)
    cls = _ERROR_CLASSES.get(status, errors.APIError)
    return cls(status, method, url, text, **fields)


_ERROR_CLASSES: dict[int, type[errors.APIError]] = {
    400: errors.BadRequestError,
    401: errors.AuthenticationError,
    404: errors.NotFoundError,
}


def _error_fields(body: bytes) -> dict[str, str | None]:
    """``detail`` or ``error``/``message`` from either error shape, as sent."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(data, dict):
        return {}
    fields = {name: data.get(name) for name in ("detail", "error", "message")}
    return {name: value if isinstance(value, str) else None for name, value in fields.items()}


def _case_insensitive(headers: Mapping[str, str]) -> Mapping[str, str]:
    """HTTP header names are case-insensitive, whatever mapping carries them."""
    if isinstance(headers, CIMultiDict | CIMultiDictProxy):
        return headers
    return CIMultiDict(headers)


def _without_query(url: str) -> str:
    return url.partition("?")[0]


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if seconds == seconds else None
