"""Fault injection rules: what to break, on which route and method, how often."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Literal

import attrs
import cattrs
import orjson
from aiohttp import web

from ._http import ROUTE_NAMES, RouteSpec, ServiceError, error_response, json_response

__all__ = ["FaultSpec", "Faults", "InvalidFaults"]

Kind = Literal[
    "429",
    "500",
    "502",
    "503",
    "504",
    "latency",
    "drop",
    "drop_mid_body",
    "html",
    "truncated",
    "empty",
    "wrong_content_type",
    "wrong_type",
    "redirect",
]
_v = attrs.validators


def _upper(method: str | None) -> str | None:
    return method.upper() if method is not None else None


class InvalidFaults(ValueError):
    """The fault settings sent to the admin route are not valid."""


@attrs.frozen(kw_only=True)
class FaultSpec:
    """One rule, as sent to ``PUT /_sandbox/faults``.

    Neither ``rate`` nor ``count``: every matching request. ``rate``: each
    matching request with that probability (seeded). ``count``: the next N
    matching requests (with ``rate``: at most N of them).
    """

    kind: Kind
    route: str = attrs.field(default="*", validator=_v.in_(ROUTE_NAMES | {"*"}))
    method: str | None = attrs.field(default=None, converter=_upper)
    rate: float | None = attrs.field(default=None, validator=_v.optional([_v.ge(0), _v.le(1)]))
    count: int | None = attrs.field(default=None, validator=_v.optional(_v.ge(0)))
    when: Literal["before", "after"] | None = None
    """Whether the request is processed before the fault (``latency``: before the
    wait); default: before for POST, after for GET."""
    retry_after: float | None = attrs.field(default=None, validator=_v.optional(_v.ge(0)))
    seconds: float = attrs.field(default=1.0, validator=_v.ge(0))
    """``latency``: real seconds to wait before answering normally."""
    status: int | None = attrs.field(default=None, validator=_v.optional([_v.ge(100), _v.le(599)]))
    """``html``: status of the page (502); other 200-answer kinds: 200."""
    location: str | None = None
    """``redirect``: target; default the same path on 127.0.0.2 (another host)."""


_converter = cattrs.Converter(forbid_extra_keys=True)


@attrs.define
class _Rule:
    spec: FaultSpec
    rng: random.Random
    remaining: int | None
    fired: int = 0

    def fire(self, route: str, method: str) -> bool:
        spec = self.spec
        if spec.route not in ("*", route) or spec.method not in (None, method):
            return False
        if self.remaining == 0:
            return False
        if spec.rate is not None and self.rng.random() >= spec.rate:
            return False
        if self.remaining is not None:
            self.remaining -= 1
        self.fired += 1
        return True


class Faults:
    """The active rules; the first matching rule that fires applies."""

    def __init__(self, seed: int) -> None:
        self._default_seed = seed
        self._seed = seed
        self._rules: list[_Rule] = []
        # Every service request seen, per route name: cumulative since start
        # (not reset with the rules), so tests can count attempts.
        self.requests: Counter[str] = Counter()

    def replace(self, payload: Any) -> None:
        """Set the rules from ``{"faults": [...], "seed": n}`` or a bare list."""
        if isinstance(payload, list):
            payload = {"faults": payload}
        if not isinstance(payload, dict) or not isinstance(payload.get("faults"), list):
            raise InvalidFaults("expected {faults: [rule, ...], seed?: int}")
        seed = payload.get("seed", self._default_seed)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InvalidFaults("seed must be an integer")
        try:
            specs = _converter.structure(payload["faults"], list[FaultSpec])
        except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
            detail = (
                "; ".join(cattrs.transform_error(exc))
                if isinstance(exc, cattrs.BaseValidationError)
                else str(exc)
            )
            raise InvalidFaults(detail) from exc
        self._seed = seed
        # One generator per rule: faults on one route do not shift another's draws.
        self._rules = [
            _Rule(spec, random.Random(f"{seed}:{position}"), spec.count)
            for position, spec in enumerate(specs)
        ]

    def clear(self) -> None:
        self._rules = []
        self._seed = self._default_seed

    def pick(self, route: str, method: str) -> FaultSpec | None:
        self.requests[route] += 1
        for rule in self._rules:
            if rule.fire(route, method):
                return rule.spec
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self._seed,
            "requests": dict(self.requests),
            "faults": [
                {
                    **_converter.unstructure(rule.spec),
                    "remaining": rule.remaining,
                    "fired": rule.fired,
                }
                for rule in self._rules
            ],
        }


def _body_of(processed: web.StreamResponse | None, fault: FaultSpec) -> bytes:
    if isinstance(processed, web.Response) and isinstance(processed.body, bytes):
        return processed.body
    return orjson.dumps({"sandbox_fault": fault.kind, "processed": False})


async def render_fault(
    request: web.Request,
    spec: RouteSpec,
    fault: FaultSpec,
    processed: web.StreamResponse | None,
) -> web.StreamResponse:
    """The answer ``fault`` makes of a request (``processed``: the handler's own
    answer, when the fault comes after the request was processed)."""
    kind = fault.kind
    if kind.isdigit():
        headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
        return error_response(request, spec.shape, ServiceError.http(int(kind), headers))
    body = _body_of(processed, fault)
    status = fault.status or 200
    if kind == "html":
        status = fault.status or 502
        page = f"<html><head><title>{status} Bad Gateway</title></head><body><h1>{status}</h1>"
        return web.Response(text=page + "</body></html>", status=status, content_type="text/html")
    if kind == "truncated":
        return web.Response(
            body=body[: len(body) // 2], status=status, content_type="application/json"
        )
    if kind == "empty":
        return web.Response(body=b"", status=status, content_type="application/json")
    if kind == "wrong_content_type":
        return web.Response(body=body, status=status, content_type="text/plain")
    if kind == "wrong_type":
        wrong = {"unexpected": "object"} if spec.returns == "list" else ["unexpected", "list"]
        return json_response(wrong, status)
    if kind == "redirect":
        port = request.url.port
        location = fault.location or f"http://127.0.0.2:{port}{request.path_qs}"
        return web.Response(status=302, headers={"Location": location})
    if kind == "drop":
        _close(request)
        return web.Response()
    # drop_mid_body: a promised body that stops half way.
    response = web.StreamResponse(status=status, headers={"Content-Type": "application/json"})
    response.content_length = len(body)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    _close(request)
    return response


def _close(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.close()
