"""The middleware of the service routes: error bodies instead of traces, and
the faults a test asked for."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from aiohttp import web

from .._redaction import sdk_logger
from ._faults import render_fault
from ._http import ServiceError, Shape, error_response
from ._keys import FAULTS, PREFIXES, SPECS

log = sdk_logger("campaignkit.sandbox")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# ---- middleware: errors and faults ----------------------------------------
async def _answer(request: web.Request, handler: Handler, shape: Shape) -> web.StreamResponse:
    """Run the handler; every failure becomes an error body, never a trace."""
    try:
        return await handler(request)
    except ServiceError as error:
        return error_response(request, shape, error)
    except web.HTTPException:
        raise
    except ConnectionResetError:  # the caller hung up while we read its body
        log.info("client went away: %s %s", request.method, request.path)
        return web.Response(status=499)
    except Exception:
        log.exception("sandbox handler failed: %s %s", request.method, request.path)
        internal = ServiceError(500, "internal_error", "Internal sandbox error.", "Error interno.")
        return error_response(request, shape, internal)


@web.middleware
async def service_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    match = request.match_info
    if match.http_exception is not None:
        shape: Shape = "detail" if request.path.startswith(PREFIXES["campaign"]) else "error"
        status = match.http_exception.status
        return error_response(request, shape, ServiceError.http(status))
    spec = request.app[SPECS].get(match.route)
    if spec is None:  # admin routes
        return await _answer(request, handler, "error")
    fault = request.app[FAULTS].pick(spec.name, request.method)
    if fault is None:
        return await _answer(request, handler, spec.shape)
    log.info("fault %s on %s %s", fault.kind, request.method, request.path)
    when = fault.when or ("before" if request.method == "POST" else "after")
    if fault.kind == "latency":
        if when == "after":  # processed at once, answered late: a timeout is ambiguous
            response = await _answer(request, handler, spec.shape)
            await asyncio.sleep(fault.seconds)
            return response
        await asyncio.sleep(fault.seconds)
        return await _answer(request, handler, spec.shape)
    processed = await _answer(request, handler, spec.shape) if when == "after" else None
    return await render_fault(request, spec, fault, processed)
