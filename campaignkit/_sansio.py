"""The wire layer, without I/O: builds each request and reads each answer.

``build_request`` turns validated call arguments into a :class:`Request`
(method, URL, headers, JSON bytes); ``read_response`` turns an answer (status,
headers, bytes) into a model or a typed error. The transport only moves bytes.
"""

from __future__ import annotations

import email.utils
import platform
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlencode

import aiohttp
import attrs
import msgspec
import orjson
from multidict import CIMultiDict, CIMultiDictProxy

from . import errors
from ._convert import loader, structurer
from ._version import __version__
from .config import ClientConfig
from .models import User

T = TypeVar("T")

USER_AGENT = (
    f"campaignkit/{__version__} python/{platform.python_version()} aiohttp/{aiohttp.__version__}"
)
ERROR_BODY_CHARS = 2000


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
) -> Request:
    """A request to ``endpoint``; path parameters must be encoded already."""
    url = config.host(endpoint.host) + endpoint.path.format_map(path_params or {})
    if query:
        url = f"{url}?{urlencode(query)}"
    return build_request_to_url(config, endpoint, url, json=json, users=users)


def build_request_to_url(
    config: ClientConfig,
    endpoint: Endpoint,
    url: str,
    *,
    json: Any = None,
    users: tuple[User, ...] = (),
) -> Request:
    """A request to an already-built URL (the tracker's ``status_url``)."""
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if config.authorize_session_update or not endpoint.key_optional:
        headers[config.auth_header] = config.authorization
    body = None
    if json is not None:
        headers["Content-Type"] = "application/json"
        body = orjson.dumps(json)
    return Request(endpoint, url, headers, body, users)


Decode = Callable[[bytes, int, Mapping[str, str]], T]
"""Reads a 2xx answer's body (given its status and headers) as a model."""


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


def parse_json(body: bytes, status: int, headers: Mapping[str, str]) -> Any:
    """``body`` as JSON, or a :class:`ResponseError` that says what came instead."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    content_type = _case_insensitive(headers).get("Content-Type", "")
    if not body:
        what = "an empty body"
    elif "html" in content_type or body.lstrip()[:1] == b"<":
        what = "an HTML page (a proxy or gateway answered?)"
    else:
        what = f"a body that is not JSON ({len(body)} bytes, Content-Type {content_type!r})"
    raise errors.ResponseError(f"expected JSON, got {what}", status=status)


def decoder(cls: type[T]) -> Decode[T]:
    """A decode function for ``read_response`` that builds ``cls``.

    msgspec builds it straight from the bytes where it can; whatever it
    refuses is parsed by orjson and built by the converter, which raise the
    :class:`ResponseError` that names the problem and its path.
    """
    decode = _decoders.get(cls)
    if decode is None:
        decode = _decoders[cls] = _make_decoder(cls)
    return decode


_decoders: dict[Any, Decode[Any]] = {}


def _make_decoder(cls: type[T]) -> Decode[T]:
    load = loader(cls)
    build = structurer(cls)

    def decode(body: bytes, status: int, headers: Mapping[str, str]) -> T:
        if load is not None:
            try:
                return load(body)
            except msgspec.MsgspecError:
                pass
        return build(parse_json(body, status, headers))

    return decode


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
