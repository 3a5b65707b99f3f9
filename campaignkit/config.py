"""Client configuration: hosts, credentials, timeouts, retry policy, and the
wire details the spec leaves open (auth scheme, session-listing parameters)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from ._redaction import register
from .errors import ConfigurationError

__all__ = ["ClientConfig", "RetryPolicy", "SessionQueryNames"]

ENV_API_KEY = "CAMPAIGNKIT_API_KEY"
ENV_URLS = {
    "base_url": "CAMPAIGNKIT_BASE_URL",
    "campaign_url": "CAMPAIGNKIT_CAMPAIGN_URL",
    "agent_url": "CAMPAIGNKIT_AGENT_URL",
}


_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|session|signature", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")

Headers = tuple[tuple[str, str], ...]


def header_items(headers: Mapping[str, str] | Headers | None) -> Headers:
    """``headers`` as ``(name, value)`` pairs (what a frozen config keeps)."""
    if headers is None:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    return tuple((name, value) for name, value in items)


def header_problems(headers: Headers, field: str, auth_header: str) -> list[tuple[str, str]]:
    """What is wrong with headers to add to requests: a name that is not an
    HTTP token, a value with a line break or control character, the auth
    header (the key is only ever the configured one)."""
    problems = []
    for name, value in headers:
        where = f"{field}[{name!r}]"
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            problems.append((where, "must be a header name (letters, digits, -, no spaces)"))
        elif name.lower() == auth_header.lower():
            problems.append((where, "cannot be set: the API key goes in this header"))
        elif not isinstance(value, str) or _CONTROL.search(value.replace("\t", " ")):
            problems.append((where, "must be text without line breaks or control characters"))
    return problems


def _redacted(_: object) -> str:
    return "'***'"


def _headers_repr(headers: Headers) -> str:
    """The headers, the values of names that look secret shown as ``***``."""
    return repr(
        tuple(
            (name, "***" if _SECRET_HEADER.search(str(name)) else value) for name, value in headers
        )
    )


def is_positive_seconds(value: object) -> bool:
    """A positive int or float: not a bool, a string or NaN."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def is_retry_count(value: object) -> bool:
    """An int >= 0 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@attrs.frozen
class SessionQueryNames:
    """Query parameter names of the session listing: the spec does not publish
    them, the service's public documentation does (``since``, ``until``,
    ``limit``, ``after``). Override them here, in one place, if it changes."""

    start: str = "since"
    end: str = "until"
    limit: str = "limit"
    cursor: str = "after"


@attrs.frozen
class RetryPolicy:
    """How failed calls are retried (the guide "Errors and retries").

    ``max_retries`` counts retries after the first attempt. Waits grow from
    ``backoff_initial`` doubling up to ``backoff_max``, with full jitter; a
    ``Retry-After`` answer is honoured up to ``retry_after_cap``. ``deadline``
    bounds one call's attempts and waits together (None: no bound).

    ``resend_after_429``: a send answered 429 is resent, as HTTP defines 429
    as refused (so without effect). False distrusts that (a gateway that
    answers 429 after the service acted on the request): such a send then
    raises :class:`~campaignkit.AmbiguousSendError` and is never resent.
    """

    max_retries: int = 2
    backoff_initial: float = 0.5
    backoff_max: float = 8.0
    retry_after_cap: float = 60.0
    deadline: float | None = 120.0
    resend_after_429: bool = True

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.resend_after_429, bool):
            raise ConfigurationError(
                "resend_after_429 must be True or False, got "
                f"{type(self.resend_after_429).__name__} {self.resend_after_429!r}"
            )
        # Checked here, not at the first retry, where a bad value would fail
        # in the backoff arithmetic with a TypeError.
        if not is_retry_count(self.max_retries):
            raise ConfigurationError(f"max_retries must be an int >= 0, got {self.max_retries!r}")
        waits = (self.backoff_initial, self.backoff_max, self.retry_after_cap)
        if not all(is_positive_seconds(wait) for wait in waits):
            raise ConfigurationError(
                "backoff_initial, backoff_max and retry_after_cap must be positive seconds"
            )
        if self.deadline is not None and not is_positive_seconds(self.deadline):
            raise ConfigurationError(
                f"deadline must be positive seconds or None, got {self.deadline!r}"
            )


@attrs.frozen
class ClientConfig:
    """Everything a :class:`~campaignkit.CampaignClient` needs to reach the service.

    The API key travels as ``{auth_header}: {auth_scheme} {key}`` (the raw key
    when ``auth_scheme`` is empty, as the spec's examples show). The spec shows
    no credential on the session update; the key is sent there too unless
    ``authorize_session_update`` is False. Base URLs may carry a path prefix,
    which is kept. ``timeout`` bounds each request, ``connect_timeout`` its
    connection phase. ``default_headers`` go on every request (never the auth
    header; values of names that look secret, such as ``X-Gateway-Key`` or
    ``Cookie``, are redacted like the key); ``trust_env`` takes proxies from
    ``HTTP(S)_PROXY``/``NO_PROXY`` (and ``~/.netrc``), as aiohttp does;
    ``log_bodies`` adds the bodies, phone numbers masked and the key redacted,
    to the ``campaignkit`` logger's DEBUG line of each exchange.
    """

    api_key: str = attrs.field(repr=_redacted)
    base_url: str | None = None
    campaign_url: str | None = None
    agent_url: str | None = None
    timeout: float = 30.0
    connect_timeout: float = 10.0
    retry: RetryPolicy = RetryPolicy()
    auth_header: str = "Authorization"
    auth_scheme: str = ""
    authorize_session_update: bool = True
    session_query: SessionQueryNames = SessionQueryNames()
    max_response_bytes: int = 256 * 1024 * 1024
    max_connections: int = 100
    default_headers: Headers = attrs.field(default=(), converter=header_items, repr=_headers_repr)
    trust_env: bool = True
    log_bodies: bool = False

    def __attrs_post_init__(self) -> None:
        # First, so that even the errors below cannot show them.
        register(self.api_key if isinstance(self.api_key, str) else None)
        for name, value in self.default_headers:
            if isinstance(value, str) and _SECRET_HEADER.search(str(name)):
                register(value)  # a gateway's key, a cookie: masked like the API key
        if not isinstance(self.api_key, str) or not self.api_key.strip():
            raise ConfigurationError(
                f"no API key: pass api_key= or set {ENV_API_KEY} "
                "(the Developers section of the platform's settings gives it)"
            )
        if _CONTROL.search(self.api_key) or _CONTROL.search(self.auth_scheme):
            # A header value cannot carry these; say so without showing the key.
            raise ConfigurationError("the API key (or auth_scheme) contains control characters")
        for name in ENV_URLS:
            url = getattr(self, name)
            if url is not None:
                object.__setattr__(self, name, _checked_url(name, url))
        if not (is_positive_seconds(self.timeout) and is_positive_seconds(self.connect_timeout)):
            raise ConfigurationError("timeout and connect_timeout must be positive seconds")
        if not is_retry_count(self.max_connections) or self.max_connections < 1:
            raise ConfigurationError("max_connections must be at least 1")
        problems = header_problems(self.default_headers, "default_headers", self.auth_header)
        if problems:
            raise ConfigurationError("; ".join(f"{path}: {message}" for path, message in problems))

    @classmethod
    def from_env(cls, api_key: str | None = None, **settings: Any) -> ClientConfig:
        """Build a config, taking what is not given from ``CAMPAIGNKIT_*``."""
        key = api_key if api_key is not None else os.environ.get(ENV_API_KEY, "")
        for name, env in ENV_URLS.items():
            if settings.get(name) is None:
                settings[name] = os.environ.get(env) or None
        return cls(key, **settings)

    @property
    def authorization(self) -> str:
        """The value of the auth header."""
        return f"{self.auth_scheme} {self.api_key}" if self.auth_scheme else self.api_key

    def host(self, name: str) -> str:
        """The base URL called ``name``, or a :class:`ConfigurationError`."""
        url: str | None = getattr(self, name)
        if url is None:
            raise ConfigurationError(
                f"{name} is not configured: pass {name}= or set {ENV_URLS[name]}"
            )
        return url


def _checked_url(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(f"{name} must be an http(s) URL with a host, got {url!r}")
    if parts.query or parts.fragment:
        raise ConfigurationError(f"{name} must not carry a query or fragment: {url!r}")
    return url.rstrip("/")
