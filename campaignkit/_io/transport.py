"""The retry rules around the I/O seam: a :class:`Request` goes through an
:class:`Exchange` and is retried by the documented rules (the guide "Errors
and retries"), in a tenacity loop entered only once a first attempt failed.

Reads retry on transport failures, 429 and 500/502/503/504. Sends retry only
when the request surely had no effect (a connect failure before any byte was
written, or a 429); any other failure after which it may have reached the
service becomes an :class:`AmbiguousSendError`, never a silent resend.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

import attrs
import orjson
import tenacity

from .. import errors
from .._backoff import RetryAfter
from .._input.validation import Problems, raise_problems
from .._redaction import sdk_logger
from .._wire.sansio import Decode, Request, read_response
from ..config import ClientConfig, is_positive_seconds, is_retry_count
from . import telemetry
from .body_log import loggable_body
from .exchange import Answer, Exchange
from .unsent import note_unsent, retry_waits

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

logger = sdk_logger("campaignkit")

RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})


@attrs.frozen
class RawAnswer:
    """One HTTP answer as it came: which call, its URL (no key: it travels in
    a header), ``status``, ``headers`` (case-insensitive) and ``body`` bytes."""

    call: str
    method: str
    url: str
    status: int
    headers: Mapping[str, str] = attrs.field(repr=False)
    body: bytes = attrs.field(repr=False)

    def json(self) -> Any:
        """The body parsed as JSON (``ValueError`` when it is not JSON)."""
        return orjson.loads(self.body)


_recorders: ContextVar[list[RawAnswer] | None] = ContextVar("campaignkit_answers", default=None)


@contextlib.contextmanager
def recording_answers(answers: list[RawAnswer] | None = None) -> Iterator[list[RawAnswer]]:
    """Every answer to the calls made inside the block (in this task and the
    tasks it starts), retries included, appended to the list it yields."""
    answers = [] if answers is None else answers
    token = _recorders.set(answers)
    try:
        yield answers
    finally:
        _recorders.reset(token)


def is_retryable(request: Request, exc: BaseException, *, resend_after_429: bool = True) -> bool:
    """Whether ``exc`` from ``request`` may be retried (never cancellation)."""
    if isinstance(exc, errors.RateLimitError):
        return resend_after_429 or not request.endpoint.is_send
    if isinstance(exc, errors.ConnectionError | errors.TimeoutError):
        return not request.endpoint.is_send or not exc.request_sent
    if isinstance(exc, errors.ServerError):
        return not request.endpoint.is_send and exc.status in RETRIED_STATUSES
    return False


def may_have_reached_service(exc: BaseException, *, resend_after_429: bool = True) -> bool:
    """Whether a send that failed with ``exc`` may still have taken effect."""
    if isinstance(exc, errors.RateLimitError):
        return not resend_after_429
    if isinstance(exc, errors.ConnectionError | errors.TimeoutError):
        return exc.request_sent
    if isinstance(exc, errors.ResponseError):
        # A 2xx whose body is not JSON may come from anything on the way; JSON
        # of the wrong shape (a field path) is the service's own answer.
        return exc.path is None
    # A 3xx came from something that read the whole request (a proxy, or the
    # service itself after acting on it): whether it took effect is unknown.
    return isinstance(exc, errors.ServerError | errors.RedirectError)


class StopBefore(tenacity.stop.stop_base):
    """Stop rather than wait past ``deadline`` on ``clock`` (tenacity's
    ``stop_before_delay`` counts from the first attempt on the process's
    monotonic clock; a call's deadline counts from the call, on the
    transport's clock, which tests replace with fake time)."""

    def __init__(self, clock: Clock, deadline: float) -> None:
        self.clock = clock
        self.deadline = deadline

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return self.clock() + (retry_state.upcoming_sleep or 0.0) >= self.deadline


def call_option_problems(timeout: float | None, max_retries: int | None) -> Problems:
    """What is wrong with a call's ``timeout`` and ``max_retries`` (None: not given)."""
    problems: Problems = []
    if timeout is not None and not is_positive_seconds(timeout):
        problems.append(("timeout", f"must be a positive number of seconds, got {timeout!r}"))
    if max_retries is not None and not is_retry_count(max_retries):
        problems.append(("max_retries", f"must be an int >= 0, got {max_retries!r}"))
    return problems


class Transport:
    """Sends requests through an :class:`Exchange` with the retry rules.

    ``clock`` (monotonic seconds) and ``sleep`` are the time the retries, the
    tracker's polls and bulk pacing read: :mod:`campaignkit.testing` replaces
    them with fake time.
    """

    def __init__(
        self, config: ClientConfig, exchange: Exchange, *, owns_exchange: bool = True
    ) -> None:
        self.config = config
        self.exchange = exchange
        self.owns_exchange = owns_exchange
        """Whether :meth:`aclose` closes the exchange (not when it is shared)."""
        self.clock: Clock = time.monotonic
        self.sleep: Sleep = asyncio.sleep

    def sharing(self, config: ClientConfig) -> Transport:
        """A transport with ``config`` over this one's exchange, clock and
        sleep, as they are now; closing it leaves the exchange to this one."""
        shared = Transport(config, self.exchange, owns_exchange=False)
        shared.clock, shared.sleep = self.clock, self.sleep
        return shared

    async def aclose(self) -> None:
        """Close the exchange if this transport owns it; calling it again does nothing."""
        if self.owns_exchange:
            await self.exchange.aclose()

    async def call(
        self,
        request: Request,
        decode: Decode[T],
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> T:
        """Send ``request`` with retries and return its decoded answer.

        The first attempt is made here, plainly: a call answered at once pays
        nothing for the retries (benchmarks row 3). Once it failed,
        :meth:`_retried` goes on in tenacity's loop.
        """
        if timeout is not None or max_retries is not None:
            raise_problems(call_option_problems(timeout, max_retries))
        policy = self.config.retry
        timeout = self.config.timeout if timeout is None else timeout
        deadline_at = None if policy.deadline is None else self.clock() + policy.deadline
        try:
            first_timeout = timeout if policy.deadline is None else min(timeout, policy.deadline)
            answer = await self._exchange(request, first_timeout, 1)
            return self._read(request, answer, decode)
        except errors.CampaignKitError as exc:
            failure = exc
        retries = policy.max_retries if max_retries is None else max_retries
        try:
            return await self._retried(request, decode, failure, timeout, retries, deadline_at)
        except errors.CampaignKitError as exc:
            failure = exc
        trust = policy.resend_after_429
        if request.endpoint.is_send and isinstance(failure, errors.ResponseError):
            failure.users = request.users
        if request.endpoint.is_send and may_have_reached_service(failure, resend_after_429=trust):
            raise errors.AmbiguousSendError(
                f"{request.endpoint.name} may or may not have reached the service "
                f"({failure}); it was not resent: check before sending again",
                users=request.users,
                cause=failure,
            ) from None
        raise failure

    async def _retried(
        self,
        request: Request,
        decode: Decode[T],
        failure: errors.CampaignKitError,
        timeout: float,
        retries: int,
        deadline_at: float | None,
    ) -> T:
        """The retries after a first attempt that failed with ``failure``:
        tenacity's loop, whose first attempt is that one. It retries what
        :func:`is_retryable` allows, at most ``retries`` times, waiting a
        failure's ``Retry-After`` or else full-jitter exponential backoff
        (uniform in ``[0, min(backoff_max, initial * 2**(retry-1))]``), and
        never into a wait that ends past the call's deadline; it raises the
        last failure."""
        policy = self.config.retry
        trust = policy.resend_after_429
        stop: tenacity.stop.stop_base = tenacity.stop_after_attempt(retries + 1)
        if deadline_at is not None:
            stop |= StopBefore(self.clock, deadline_at)
        backoff = tenacity.wait_random_exponential(
            multiplier=policy.backoff_initial, max=policy.backoff_max
        )
        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(
                lambda exc: is_retryable(request, exc, resend_after_429=trust)
            ),
            wait=RetryAfter(backoff, policy.retry_after_cap),
            stop=stop,
            sleep=lambda wait: self._wait_to_retry(request, wait),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                number = attempt.retry_state.attempt_number
                if number == 1:
                    raise failure  # made by call(), before the loop
                left = timeout if deadline_at is None else deadline_at - self.clock()
                if left <= 0:  # the deadline passed while waiting
                    raise errors.TimeoutError("the call's deadline passed", request_sent=False)
                answer = await self._exchange(request, min(timeout, left), number)
                decoded = self._read(request, answer, decode)
        return decoded

    async def _wait_to_retry(self, request: Request, wait: float) -> None:
        """tenacity's sleep between two attempts: no request is under way, so
        a bulk send stopping cancels it (:data:`retry_waits`), and a
        cancellation here is noted as leaving the request unsent."""
        waits = retry_waits.get()
        try:
            with contextlib.nullcontext() if waits is None else waits.waiting():
                await self.sleep(wait)
        except asyncio.CancelledError as cancelled:
            note_unsent(cancelled)
            raise
        telemetry.retried(request.endpoint.name)

    async def attempt(
        self,
        request: Request,
        decode: Decode[T],
        timeout: float | None = None,
        attempt_number: int = 1,
    ) -> T:
        """One try of ``request``: exactly one HTTP exchange, no retry."""
        timeout = self.config.timeout if timeout is None else timeout
        answer = await self._exchange(request, timeout, attempt_number)
        return self._read(request, answer, decode)

    def _exchange(
        self, request: Request, timeout: float, attempt_number: int, *, logged: bool = True
    ) -> Awaitable[Answer]:
        """The exchange of one attempt, logged at DEBUG and in a span when tracing.

        On the success path of a small call this is the exchange's own
        awaitable, not a coroutine around it: every coroutine between a call
        and aiohttp is resumed at each wait of the exchange (benchmarks row 3).
        """
        if logged and logger.isEnabledFor(logging.DEBUG):
            return self._logged_exchange(request, timeout, attempt_number)
        if telemetry.tracing():
            return telemetry.traced_exchange(
                request, attempt_number, lambda: self.exchange(request, timeout)
            )
        return self.exchange(request, timeout)

    def _read(self, request: Request, answer: Answer, decode: Decode[T]) -> T:
        """The answer recorded (when asked) and decoded, or its typed error."""
        recorder = _recorders.get()
        if recorder is not None:
            endpoint = request.endpoint
            recorder.append(
                RawAnswer(
                    endpoint.name,
                    endpoint.method,
                    request.url,
                    answer.status,
                    answer.headers,
                    answer.body,
                )
            )
        return read_response(request, answer.status, answer.headers, answer.body, decode)

    async def _logged_exchange(
        self, request: Request, timeout: float, attempt_number: int
    ) -> Answer:
        """The exchange, and a DEBUG line for it (with the bodies, masked,
        when the config says ``log_bodies``)."""
        started = time.monotonic()
        answer: Answer | None = None
        try:
            answer = await self._exchange(request, timeout, attempt_number, logged=False)
            return answer
        finally:
            endpoint = request.endpoint
            line = "%s %s -> %s attempt=%d elapsed=%.3fs"
            args: list[object] = [
                endpoint.method,
                endpoint.path,
                "-" if answer is None else answer.status,
                attempt_number,
                time.monotonic() - started,
            ]
            if self.config.log_bodies:
                line += " request=%s answer=%s"
                args += [
                    loggable_body(request.body),
                    "-" if answer is None else loggable_body(answer.body),
                ]
            logger.debug(line, *args)
