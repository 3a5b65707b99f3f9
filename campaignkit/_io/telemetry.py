"""OpenTelemetry, when it is installed (extra ``otel``): a client span per HTTP
exchange and a few counters. Without it every hook is a no-op, and the hot
path pays one ``is None`` test.

Spans carry the method, the path *template* (``/v2/send-campaign/{poll_id}``),
the status and the attempt number: never the key, a body or a phone number.
The instruments are made from the global providers, which OpenTelemetry
resolves when the application sets them, before or after this import.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

T = TypeVar("T")

if TYPE_CHECKING:
    from .._wire.sansio import Request

try:
    from opentelemetry import metrics, trace
except ImportError:  # the extra is not installed
    tracer: Any = None
    _meter: Any = None
    _trace: Any = None
else:
    _trace = trace
    _NOT_RECORDING = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    from .._version import __version__

    tracer = trace.get_tracer("campaignkit", __version__)
    _meter = metrics.get_meter("campaignkit", __version__)

if _meter is not None:
    _polls = _meter.create_counter("campaignkit.tracker.polls", "{poll}", "status polls made")
    _changes = _meter.create_counter(
        "campaignkit.tracker.changes", "{change}", "deployment status changes seen"
    )
    _users = _meter.create_counter(
        "campaignkit.bulk.users", "{user}", "users of bulk-send requests, by outcome"
    )
    _retries = _meter.create_counter(
        "campaignkit.client.retries", "{retry}", "requests made again after a failure"
    )


_recording = False
_checked_at = -1.0


def tracing() -> bool:
    """Whether spans would be recorded: an application has set a tracer provider.

    Asked at most once a second (OpenTelemetry reads the environment on every
    ask): a provider set while calls run is picked up within a second.
    """
    global _recording, _checked_at
    if _trace is None:
        return False
    now = time.monotonic()
    if now - _checked_at > 1.0:
        _checked_at = now
        _recording = not isinstance(_trace.get_tracer_provider(), _NOT_RECORDING)
    return _recording


def recheck() -> None:
    """Ask about the tracer provider again on the next exchange (tests set it)."""
    global _checked_at
    _checked_at = -1.0


async def traced_exchange(
    request: Request, attempt: int, exchange: Callable[[], Awaitable[T]]
) -> T:
    """``exchange()`` inside a client span describing ``request``."""
    from opentelemetry.trace import SpanKind, Status, StatusCode

    endpoint = request.endpoint
    with tracer.start_as_current_span(
        f"{endpoint.method} {endpoint.path}",
        kind=SpanKind.CLIENT,
        attributes={
            "http.request.method": endpoint.method,
            "url.template": endpoint.path,
            "campaignkit.endpoint": endpoint.name,
            "campaignkit.attempt": attempt,
        },
        record_exception=False,  # exception texts may hold URLs with ids
        set_status_on_exception=False,
    ) as span:
        try:
            answer = await exchange()
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.set_attribute("error.type", type(exc).__name__)
            raise
        status = getattr(answer, "status", None)
        if status is not None:
            span.set_attribute("http.response.status_code", status)
            if status >= 400:
                span.set_status(Status(StatusCode.ERROR))
        return answer


def polled(changes: int) -> None:
    if _meter is not None:
        _polls.add(1)
        if changes:
            _changes.add(changes)


def users_sent(outcome: str, count: int) -> None:
    if _meter is not None:
        _users.add(count, {"outcome": outcome})


def retried(endpoint: str) -> None:
    if _meter is not None:
        _retries.add(1, {"campaignkit.endpoint": endpoint})
