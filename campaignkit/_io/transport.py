"""The retry rules around the I/O seam: a :class:`Request` goes through an
:class:`Exchange` and is retried with tenacity, by the rules of the README.

Reads retry on transport failures, 429 and 500/502/503/504. Sends retry only
when the request surely had no effect (a connect failure before any byte was
written, or a 429); any other failure after which it may have reached the
service becomes an :class:`AmbiguousSendError`, never a silent resend.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import tenacity

from .. import errors
from .._input.validation import Problems, raise_problems
from .._redaction import sdk_logger
from .._wire.sansio import Decode, Request, read_response
from ..config import ClientConfig, RetryPolicy, is_positive_seconds, is_retry_count
from . import telemetry
from .exchange import Exchange

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

logger = sdk_logger("campaignkit")

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})


def is_retryable(request: Request, exc: BaseException) -> bool:
    """Whether ``exc`` from ``request`` may be retried (never cancellation)."""
    if isinstance(exc, errors.RateLimitError):
        return True
    if isinstance(exc, errors.ConnectionError | errors.TimeoutError):
        return not request.endpoint.is_send or not exc.request_sent
    if isinstance(exc, errors.ServerError):
        return not request.endpoint.is_send and exc.status in RETRIED_STATUSES
    return False


def may_have_reached_service(exc: BaseException) -> bool:
    """Whether a send that failed with ``exc`` may still have taken effect."""
    if isinstance(exc, errors.ConnectionError | errors.TimeoutError):
        return exc.request_sent
    if isinstance(exc, errors.ResponseError):
        # A 2xx whose body is not JSON may come from anything on the way; JSON
        # of the wrong shape (a field path) is the service's own answer.
        return exc.path is None
    # A 3xx came from something that read the whole request (a proxy, or the
    # service itself after acting on it): whether it took effect is unknown.
    return isinstance(exc, errors.ServerError | errors.RedirectError)


class _Backoff(tenacity.wait.wait_base):
    """Full-jitter exponential backoff, overridden by a ``Retry-After``."""

    def __init__(self, policy: RetryPolicy) -> None:
        self._policy = policy
        self._jitter = tenacity.wait_random_exponential(
            multiplier=policy.backoff_initial, max=policy.backoff_max
        )

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return float(min(retry_after, self._policy.retry_after_cap))
        return float(self._jitter(retry_state))


def _check_call_options(timeout: float | None, max_retries: int | None) -> None:
    problems: Problems = []
    if timeout is not None and not is_positive_seconds(timeout):
        problems.append(("timeout", f"must be a positive number of seconds, got {timeout!r}"))
    if max_retries is not None and not is_retry_count(max_retries):
        problems.append(("max_retries", f"must be an int >= 0, got {max_retries!r}"))
    raise_problems(problems)


def _within_deadline(timeout: float, deadline_at: float | None) -> float:
    """The request timeout, cut to what is left of the call's deadline."""
    if deadline_at is None:
        return timeout
    left = deadline_at - time.monotonic()
    if left <= 0:
        raise errors.TimeoutError("the call's deadline passed", request_sent=False)
    return min(timeout, left)


class Transport:
    """Sends requests through an :class:`Exchange` with the retry rules.

    ``sleep`` is the wait between retries (and the tracker's between polls):
    tests inject one.
    """

    def __init__(
        self, config: ClientConfig, exchange: Exchange, *, sleep: Sleep = asyncio.sleep
    ) -> None:
        self.config = config
        self.exchange = exchange
        self.sleep = sleep

    async def aclose(self) -> None:
        """Close the exchange; calling it again does nothing."""
        await self.exchange.aclose()

    async def call(
        self,
        request: Request,
        decode: Decode[T],
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> T:
        """Send ``request`` with retries and return its decoded answer."""
        if timeout is not None or max_retries is not None:
            _check_call_options(timeout, max_retries)
        policy = self.config.retry
        retries = policy.max_retries if max_retries is None else max_retries
        timeout = self.config.timeout if timeout is None else timeout
        deadline_at = None if policy.deadline is None else time.monotonic() + policy.deadline
        # The first attempt runs outside tenacity: its machinery costs about
        # 40 us a call, which the success path need not pay.
        try:
            return await self.attempt(request, decode, _within_deadline(timeout, deadline_at))
        except errors.CampaignKitError as exc:
            failure = exc
        if retries and is_retryable(request, failure):
            try:
                return await self._retry(request, decode, failure, retries, timeout, deadline_at)
            except errors.CampaignKitError as exc:
                failure = exc
        if request.endpoint.is_send and isinstance(failure, errors.ResponseError):
            failure.users = request.users
        if request.endpoint.is_send and may_have_reached_service(failure):
            raise errors.AmbiguousSendError(
                f"{request.endpoint.name} may or may not have reached the service "
                f"({failure}); it was not resent: check before sending again",
                users=request.users,
                cause=failure,
            ) from None
        raise failure

    async def _retry(
        self,
        request: Request,
        decode: Decode[T],
        first_failure: errors.CampaignKitError,
        retries: int,
        timeout: float,
        deadline_at: float | None,
    ) -> T:
        """Attempts 2 to ``retries + 1`` of a call whose first attempt failed."""
        policy = self.config.retry
        stop: tenacity.stop.stop_base = tenacity.stop_after_attempt(retries + 1)
        if deadline_at is not None:
            stop = stop | tenacity.stop_before_delay(deadline_at - time.monotonic())
        retrying = tenacity.AsyncRetrying(
            stop=stop,
            wait=_Backoff(policy),
            retry=tenacity.retry_if_exception(lambda exc: is_retryable(request, exc)),
            sleep=self.sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                number = attempt.retry_state.attempt_number
                if number == 1:
                    # Replayed so that tenacity's stop and wait count it.
                    raise first_failure
                telemetry.retried(request.endpoint.name)
                return await self.attempt(
                    request, decode, _within_deadline(timeout, deadline_at), number
                )
        raise AssertionError("unreachable: tenacity either returns or raises")

    async def attempt(
        self,
        request: Request,
        decode: Decode[T],
        timeout: float | None = None,
        attempt_number: int = 1,
    ) -> T:
        """One try of ``request``: exactly one HTTP exchange, no retry."""
        timeout = self.config.timeout if timeout is None else timeout
        started = time.monotonic()
        status: int | str = "-"
        try:
            if not telemetry.tracing():
                answer = await self.exchange(request, timeout)
            else:
                answer = await telemetry.traced_exchange(
                    request, attempt_number, lambda: self.exchange(request, timeout)
                )
            status = answer.status
        finally:
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "%s %s -> %s attempt=%d elapsed=%.3fs",
                    request.endpoint.method,
                    request.endpoint.path,
                    status,
                    attempt_number,
                    time.monotonic() - started,
                )
        return read_response(request, answer.status, answer.headers, answer.body, decode)
