"""Sandbox-only admin routes under ``/_sandbox/`` (no real endpoint uses it).

Tests and benchmarks check what the service received only through these.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from ._faults import InvalidFaults
from ._http import ServiceError, json_response
from ._keys import FAULTS, REPLIES, WORLD
from ._sessions import US
from ._state import Company, Launch, NotRepliable

__all__ = ["ADMIN_PREFIX", "add_admin_routes"]

ADMIN_PREFIX = "/_sandbox"


def _invalid(message: str) -> ServiceError:
    return ServiceError(400, "bad_request", message)


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = orjson.loads(await request.read() or b"{}")
    except orjson.JSONDecodeError as exc:
        raise _invalid(f"the body is not valid JSON ({exc.msg})") from exc
    if not isinstance(body, dict):
        raise _invalid("the body must be a JSON object")
    return body


def _number(body: dict[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise _invalid(f"{name} must be a number")
    return value


def _company(request: web.Request) -> Company:
    company_id = request.match_info["company_id"]
    company = request.app[WORLD].companies.get(company_id)
    if company is None:
        raise ServiceError(404, "not_found", f"company {company_id} not found")
    return company


async def state(request: web.Request) -> web.Response:
    """Snapshot; ``?company=ID``, ``?launch=ID``, ``?users=0`` for counts only."""
    query = request.query
    users = query.get("users", "1") not in ("0", "false")
    return json_response(
        request.app[WORLD].snapshot(query.get("company"), users, query.get("launch"))
    )


async def get_faults(request: web.Request) -> web.Response:
    return json_response(request.app[FAULTS].to_json())


async def put_faults(request: web.Request) -> web.Response:
    faults = request.app[FAULTS]
    try:
        faults.replace(orjson.loads(await request.read()))
    except (InvalidFaults, orjson.JSONDecodeError) as exc:
        raise _invalid(f"invalid faults: {exc}") from exc
    return json_response(faults.to_json())


async def delete_faults(request: web.Request) -> web.Response:
    request.app[FAULTS].clear()
    return json_response(request.app[FAULTS].to_json())


async def get_clock(request: web.Request) -> web.Response:
    return json_response(request.app[WORLD].clock.to_dict())


async def put_clock(request: web.Request) -> web.Response:
    """``{now?, speed?, advance?}``: set the time, the speed, or jump ahead."""
    body = await _body(request)
    clock = request.app[WORLD].clock
    speed = _number(body, "speed")
    if speed is not None and speed <= 0:
        raise _invalid("speed must be > 0")
    clock.set(now=_number(body, "now"), speed=speed, advance=_number(body, "advance") or 0.0)
    return json_response(clock.to_dict())


def _find_deployment(request: web.Request, body: dict[str, Any]) -> tuple[Company, Launch, int]:
    cellphone = body.get("cellphone")
    if not isinstance(cellphone, str):
        raise _invalid("cellphone is required")
    wanted = body.get("launch_request_id")
    country_code = body.get("country_code")
    for company in request.app[WORLD].companies.values():
        for launch in reversed(company.launches.values()):
            if wanted in (None, launch.id):
                index = launch.find(country_code, cellphone)
                if index is not None:
                    return company, launch, index
    raise ServiceError(404, "not_found", f"no deployment to {cellphone} found")


async def reply(request: web.Request) -> web.Response:
    """``{cellphone, country_code?, launch_request_id?, text?}``: the user answers.

    Answers ``{session_external_id, created, webhook}`` once the webhook (if
    any) was delivered, with its status or error.
    """
    body = await _body(request)
    company, launch, index = _find_deployment(request, body)
    text = body.get("text", "Yes")
    if not isinstance(text, str):
        raise _invalid("text must be a string")
    try:
        result = await request.app[REPLIES].reply(company, launch, index, text)
    except NotRepliable as exc:
        raise ServiceError(409, "conflict", str(exc)) from exc
    return json_response(result)


async def add_company(request: web.Request) -> web.Response:
    """``{name?, lines?: [number, ...]}`` -> the new company with its api_key."""
    body = await _body(request)
    lines = body.get("lines")
    if lines is not None and not (
        isinstance(lines, list) and lines and all(isinstance(x, str) and x for x in lines)
    ):
        raise _invalid("lines must be a non-empty array of numbers")
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise _invalid("name must be a string")
    world = request.app[WORLD]
    company = world.add_company(name, tuple(lines) if lines else None)
    return json_response(world.snapshot(company.id, False, None)["companies"][0], 201)


async def set_webhook(request: web.Request) -> web.Response:
    """``{url}`` (null to remove): where first replies are POSTed."""
    company = _company(request)
    url = (await _body(request)).get("url")
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise _invalid("url must be an http(s) URL or null")
    company.webhook_url = url
    return json_response({"company_id": company.id, "webhook_url": url})


async def add_sessions(request: web.Request) -> web.Response:
    """``{poll_id, count, start?, end?}``: generate sessions lazily (UNIX seconds range)."""
    company = _company(request)
    body = await _body(request)
    world = request.app[WORLD]
    poll_id, count = body.get("poll_id"), body.get("count")
    if poll_id not in company.polls:
        raise ServiceError(404, "not_found", f"poll {poll_id} not found")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise _invalid("count must be a positive integer")
    start, end = _number(body, "start"), _number(body, "end")
    start = world.year_range_us()[0] / US if start is None else start
    end = world.clock.now() if end is None else end
    if end < start:
        raise _invalid("end must not be before start")
    block = world.add_sessions(company, poll_id, count, int(start * US), int(end * US))
    return json_response({"poll_id": poll_id, "count": count, "first_id": block.session_id(0)}, 201)


def add_admin_routes(app: web.Application) -> None:
    router = app.router
    router.add_get(f"{ADMIN_PREFIX}/state", state)
    router.add_get(f"{ADMIN_PREFIX}/faults", get_faults)
    router.add_put(f"{ADMIN_PREFIX}/faults", put_faults)
    router.add_delete(f"{ADMIN_PREFIX}/faults", delete_faults)
    router.add_get(f"{ADMIN_PREFIX}/clock", get_clock)
    router.add_put(f"{ADMIN_PREFIX}/clock", put_clock)
    router.add_post(f"{ADMIN_PREFIX}/reply", reply)
    router.add_post(f"{ADMIN_PREFIX}/companies", add_company)
    router.add_put(f"{ADMIN_PREFIX}/companies/{{company_id}}/webhook", set_webhook)
    router.add_post(f"{ADMIN_PREFIX}/companies/{{company_id}}/sessions", add_sessions)
