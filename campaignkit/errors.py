"""The exceptions campaignkit raises; every one is a :class:`CampaignKitError`.

No aiohttp, json or cattrs exception escapes a public call: transport failures
become :class:`ConnectionError` / :class:`TimeoutError` (which also subclass
Python's builtins of the same names), unreadable answers :class:`ResponseError`.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._redaction import redact

if TYPE_CHECKING:
    from .models import CampaignStatus, User

__all__ = [
    "APIError",
    "AmbiguousSendError",
    "AuthenticationError",
    "BadRequestError",
    "CampaignKitError",
    "ConfigurationError",
    "LedgerError",
    "ConnectionError",
    "NotFoundError",
    "RateLimitError",
    "RedirectError",
    "ResponseError",
    "RetiredEndpointError",
    "ServerError",
    "TimeoutError",
    "ValidationError",
]


class CampaignKitError(Exception):
    """Base class of every campaignkit error.

    Its text is redacted when it is built (and each note when it is added):
    no API key, nor a part of one, shows in its message, ``repr``, notes or
    traceback, even when it quotes a body the service or a proxy echoed.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(arg) if isinstance(arg, str) else arg for arg in args))

    def add_note(self, note: str, /) -> None:
        super().add_note(redact(note) if isinstance(note, str) else note)


class ConfigurationError(CampaignKitError):
    """The client is missing a setting (API key, a host URL) or has a bad one."""


class LedgerError(CampaignKitError):
    """The delivery ledger could not be opened, read or written, or refused an
    operation that could send somebody twice."""


class ValidationError(CampaignKitError, ValueError):
    """Bad input or a bad option, found before any request was made.

    ``problems`` lists every problem of the call as ``(path, message)`` pairs,
    with paths such as ``users[3].country_code`` (an option's path is its
    name). A ``ValueError`` too, so code catching that still works.
    """

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems: tuple[tuple[str, str], ...] = tuple(
            (path, redact(message)) for path, message in problems
        )
        lines = "".join(f"\n  {path}: {message}" for path, message in self.problems)
        count = len(self.problems)
        super().__init__(f"{count} invalid input{'s' if count != 1 else ''}:{lines}")


class APIError(CampaignKitError):
    """The service answered with an HTTP error status.

    ``detail`` is set for ``{detail}`` bodies (kept as sent, in English or
    Spanish); ``error`` and ``message`` for ``{error, message}`` bodies.
    ``url`` never carries the API key (it travels in a header only). Every
    text, ``body`` included, is redacted (see :class:`CampaignKitError`).
    """

    def __init__(
        self,
        status: int,
        method: str,
        url: str,
        body: str,
        *,
        detail: str | None = None,
        error: str | None = None,
        message: str | None = None,
    ) -> None:
        self.status = status
        self.method = method
        self.url = redact(url)
        self.body = redact(body)
        self.detail = _redacted(detail)
        self.error = _redacted(error)
        self.message = _redacted(message)
        super().__init__(self._summary())

    def _summary(self) -> str:
        said = self.detail or ": ".join(s for s in (self.error, self.message) if s)
        if not said:
            said = self.body[:200] if self.body else "(empty body)"
        return f"{self.method} {self.url} -> {self.status}: {said}"


def _redacted(text: str | None) -> str | None:
    return None if text is None else redact(text)


class BadRequestError(APIError):
    """400: the request was malformed."""


class AuthenticationError(APIError):
    """401: the API key is missing, invalid or expired."""


class NotFoundError(APIError):
    """404: no such poll, launch request or session for this company."""


class RetiredEndpointError(NotFoundError):
    """The legacy deploy endpoint answered 404/410: it was shut down on
    15 November 2026. Use ``send_campaign`` instead."""

    def _summary(self) -> str:
        return (
            f"{super()._summary()} (the legacy deploy endpoint was retired on "
            "15 November 2026: use send_campaign instead)"
        )


class RateLimitError(APIError):
    """429: too many requests; ``retry_after`` is the wait the service asked
    for, in seconds, when it said one."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(*args, **kwargs)


class ServerError(APIError):
    """5xx: the service failed; ``retry_after`` as for :class:`RateLimitError`."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(*args, **kwargs)


class RedirectError(APIError):
    """3xx: API calls never follow redirects, so the key never leaves the
    configured hosts. Check the configured base URLs."""

    def _summary(self) -> str:
        return f"{super()._summary()} (redirects are not followed; check the base URL)"


class ConnectionError(CampaignKitError, builtins.ConnectionError):
    """The connection failed or was dropped.

    ``request_sent`` is False only when the failure happened before any byte
    of the request was written (so the service surely did not receive it).
    ``proxy`` names the proxy (password masked) when the failure was its.
    """

    def __init__(self, message: str, *, request_sent: bool, proxy: str | None = None) -> None:
        self.request_sent = request_sent
        self.proxy = proxy
        super().__init__(message)


class TimeoutError(CampaignKitError, builtins.TimeoutError):
    """A request, or a whole operation, ran out of time.

    ``request_sent`` is as for :class:`ConnectionError`. A tracker's timeout
    carries the last status it read in ``last_status``.
    """

    def __init__(
        self,
        message: str,
        *,
        request_sent: bool = True,
        last_status: CampaignStatus | None = None,
    ) -> None:
        self.request_sent = request_sent
        self.last_status = last_status
        super().__init__(message)


class ResponseError(CampaignKitError):
    """The answer could not be read: not JSON, HTML from a proxy, too large, or
    of the wrong shape. ``path`` names the offending field when there is one
    (``$.deployments[3].cellphone``). On a send answered with JSON of the
    wrong shape, ``users`` are the request's users: the service did answer,
    so the send is not ambiguous, but its acknowledgement is unusable."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        status: int | None = None,
        users: Sequence[User] = (),
    ) -> None:
        self.path = path
        self.status = status
        self.users: tuple[User, ...] = tuple(users)
        super().__init__(message if path is None else f"{message} at {path}")


class AmbiguousSendError(CampaignKitError):
    """A send may or may not have reached the service.

    It is never resent automatically: a duplicate would message real people
    twice. ``users`` are the users of that request (empty for a session
    update) so the caller can decide; ``cause`` is the failure behind it.
    """

    def __init__(
        self, message: str, *, users: Sequence[User] = (), cause: BaseException | None = None
    ) -> None:
        self.users: tuple[User, ...] = tuple(users)
        self.cause = cause
        super().__init__(message)
