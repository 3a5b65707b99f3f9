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
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import SplitResult, quote, unquote, urlencode, urlsplit

import attrs
import orjson
from multidict import CIMultiDict, CIMultiDictProxy

from .. import errors
from .._input.validation import path_segment, raise_problems
from .._version import __version__
from ..config import ClientConfig
from ..models import CampaignAck, User
from .decode import Decode as Decode
from .decode import decoder as decoder

T = TypeVar("T")

# The adapter's version is read from the installed metadata: the wire layer
# names aiohttp without importing it.
USER_AGENT = (
    f"campaignkit/{__version__} python/{platform.python_version()} "
    f"aiohttp/{importlib.metadata.version('aiohttp')}"
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
    extra_headers: Mapping[str, str] | None = None,
) -> Request:
    """A request to ``endpoint``; path parameters must be encoded already,
    ``extra_headers`` checked."""
    url = config.host(endpoint.host) + endpoint.path.format_map(path_params or {})
    if query:
        url = f"{url}?{urlencode(query)}"
    return build_request_to_url(
        config, endpoint, url, json=json, users=users, extra_headers=extra_headers
    )


def build_request_to_url(
    config: ClientConfig,
    endpoint: Endpoint,
    url: str,
    *,
    json: Any = None,
    users: tuple[User, ...] = (),
    extra_headers: Mapping[str, str] | None = None,
) -> Request:
    """A request to an already-built URL (the tracker's ``status_url``): the
    config's default headers, then the call's extra ones, then the key."""
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if config.default_headers:
        headers.update(config.default_headers)
    if extra_headers:
        headers.update(extra_headers)
    if config.authorize_session_update or not endpoint.key_optional:
        headers[config.auth_header] = config.authorization
    body = None
    if json is not None:
        headers["Content-Type"] = "application/json"
        body = orjson.dumps(json)
    return Request(endpoint, url, headers, body, users)


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


def resolve_status_url(campaign_url: str, target: CampaignAck | str) -> tuple[str, str, str]:
    """``(url, launch_request_id, status_url as given)`` for a tracker target.

    A relative ``status_url`` is appended to ``campaign_url`` (which may carry
    a path prefix); an absolute one is accepted only on ``campaign_url``'s
    origin, so the API key never goes to another host. A bare
    ``launch_request_id`` becomes ``/v2/send-campaign/<id>``.
    """
    if isinstance(target, CampaignAck):
        status_url = target.status_url
        launch_request_id: str | None = target.launch_request_id
    elif isinstance(target, str):
        if "/" in target:
            status_url, launch_request_id = target, None
        else:
            problems: list[tuple[str, str]] = []
            segment = path_segment("launch_request_id", target, problems)
            raise_problems(problems)
            return f"{campaign_url}/v2/send-campaign/{segment}", target, target
    else:
        raise errors.ValidationError(
            [
                (
                    "target",
                    "expected a CampaignAck, a launch_request_id or a status_url, "
                    f"got {type(target).__name__}",
                )
            ]
        )
    if not isinstance(status_url, str) or not status_url.strip():
        raise errors.CampaignKitError(f"invalid status_url {status_url!r}")
    if any(ord(char) < 0x21 or char in "\\\x7f" for char in status_url):
        raise errors.CampaignKitError(
            f"refusing status_url {status_url!r}: whitespace, control characters or backslashes"
        )
    parts = urlsplit(status_url)
    if parts.scheme or parts.netloc:
        base = urlsplit(campaign_url)
        if parts.scheme.lower() not in ("http", "https") or parts.username or parts.password:
            raise errors.CampaignKitError(
                f"refusing status_url {status_url!r}: not a plain http(s) URL"
            )
        if _origin(parts) != _origin(base):
            raise errors.CampaignKitError(
                f"refusing status_url {status_url!r}: it is not on the campaign_url's origin "
                f"({base.scheme}://{base.netloc}); the API key is never sent to another host"
            )
        url = status_url
        path = parts.path
    else:
        path = status_url if status_url.startswith("/") else "/" + status_url
        url = campaign_url + path
    url = quote(url, safe=":/?#[]@!$&'()*+,;=%-._~")
    if launch_request_id is None:
        launch_request_id = unquote(path.rstrip("/").rpartition("/")[2])
        if not launch_request_id:
            raise errors.CampaignKitError(f"status_url {status_url!r} names no launch request")
    return url, launch_request_id, status_url


def _origin(parts: SplitResult) -> tuple[str, str, int | None]:
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise errors.CampaignKitError(f"invalid port in {parts.geturl()!r}") from None
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port
