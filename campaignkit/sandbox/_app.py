"""The aiohttp application: the spec's eight endpoints on three path prefixes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web
from aiohttp.web_urldispatcher import AbstractRoute

from ._faults import Faults
from ._http import ROUTES, RouteSpec, ServiceError, json_response
from ._keys import FAULTS, PREFIXES, REPLIES, SPECS, WORLD
from ._middleware import Handler, service_middleware
from ._replies import Replies
from ._sessions import US, BadCursor, iso_time
from ._state import Company, World
from ._users import InvalidUsers, UserIn, parse_keys, parse_users

__all__ = ["build_app"]

MAX_PAGE = 10_000
DEFAULT_PAGE = 1000
LEGACY_SHUTDOWN = "15 November 2026"


# ---- request helpers -------------------------------------------------------
def _authenticate(request: web.Request) -> Company:
    header = request.headers.get("Authorization", "").strip()
    key = header[7:].strip() if header.lower().startswith("bearer ") else header
    company = request.app[WORLD].company_for_key(key) if key else None
    if company is None:
        raise ServiceError(
            401, "unauthorized", "Invalid or missing API key.", "API key inválida o ausente."
        )
    return company


async def _read_json(request: web.Request, wrong_type_status: int = 415) -> Any:
    if request.content_type != "application/json":
        raise ServiceError(
            wrong_type_status,
            "unsupported_media_type",
            "Content-Type must be application/json.",
            "El Content-Type debe ser application/json.",
        )
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge as exc:
        limit = request.app[WORLD].config.max_body_size
        raise ServiceError(
            413,
            "payload_too_large",
            f"Request body too large (limit {limit} bytes).",
            f"Cuerpo de la solicitud demasiado grande (límite {limit} bytes).",
        ) from exc
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _bad_request(f"the body is not valid JSON ({exc.msg})") from exc


def _bad_request(reason: str) -> ServiceError:
    return ServiceError(
        400, "bad_request", f"Malformed request: {reason}.", f"Solicitud mal formada: {reason}."
    )


def _poll_id(company: Company, raw: object) -> int:
    text = str(raw)
    if text.isdigit() and int(text) in company.polls:
        return int(text)
    # The Spanish text shows only on the {detail} routes (error_response picks it).
    raise ServiceError(
        404, "not_found", f"Poll {text} not found.", f"No se encontró la encuesta {text}."
    )


def _users(body: Any) -> list[UserIn]:
    try:
        return parse_users(body)
    except InvalidUsers as exc:
        raise _bad_request(str(exc)) from exc


# ---- the eight endpoints ---------------------------------------------------
async def send_campaign(request: web.Request) -> web.Response:
    company = _authenticate(request)
    raw_poll = request.match_info.get("poll_id")
    # An unknown poll in the URL is a 404 before the body is read.
    poll_id = None if raw_poll is None else _poll_id(company, raw_poll)
    body = await _read_json(request, 400)
    if poll_id is None:
        if not isinstance(body, dict) or body.get("poll_id") in (None, ""):
            raise ServiceError(
                400,
                "bad_request",
                "The poll id is required either in the URL or in the body.",
                "El id de la encuesta es obligatorio en la URL o en el cuerpo.",
            )
        poll_id = _poll_id(company, body["poll_id"])
    launch = request.app[WORLD].launch(company, poll_id, _users(body), "send_campaign")
    request.app[REPLIES].schedule(company, launch)
    return json_response(
        {
            "message": "Campaign queued for deployment.",
            "id": str(poll_id),
            "batch_id": launch.batch_id,
            "launch_request_id": launch.id,
            "status_url": f"/v2/send-campaign/{launch.id}",
        },
        202,
    )


async def campaign_status(request: web.Request) -> web.Response:
    company = _authenticate(request)
    world = request.app[WORLD]
    launch_id = request.match_info["launch_request_id"]
    launch = world.launch_of(company, launch_id)
    if launch is None:
        raise ServiceError(
            404,
            "not_found",
            f"Launch request {launch_id} not found.",
            f"No se encontró la solicitud de lanzamiento {launch_id}.",
        )
    body = launch.status_json(world.clock.now(), world.config.step_seconds)
    return web.Response(body=body, content_type="application/json")


async def update_session(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    session_id = request.match_info["session_external_id"]
    body = await _read_json(request)
    if not isinstance(body, dict):
        raise _bad_request("the body must be an object with user_session_keys")
    try:
        keys = parse_keys(body.get("user_session_keys"), "user_session_keys")
    except InvalidUsers as exc:
        raise _bad_request(str(exc)) from exc
    record = world.session(session_id)
    if record is None:
        raise ServiceError(404, "not_found", f"Session {session_id} not found.")
    world.update_session(record, keys)
    return json_response({"message": "Session updated.", "session_id": record.id})


def _query_int(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise _bad_request(f"{name} must be an integer") from None


async def list_sessions(request: web.Request) -> web.Response:
    company = _authenticate(request)
    world = request.app[WORLD]
    poll_id = _poll_id(company, request.match_info["poll_id"])
    year_start, year_end = world.year_range_us()
    # The published names (spec/published-docs.md): since, until, limit, after.
    start, end, limit = (_query_int(request, name) for name in ("since", "until", "limit"))
    start_us = year_start if start is None else start * US
    end_us = year_end if end is None else end * US
    limit = DEFAULT_PAGE if limit is None else limit
    if not 1 <= limit <= MAX_PAGE:
        raise _bad_request(f"limit must be between 1 and {MAX_PAGE}")
    if end_us < start_us:
        raise _bad_request("until must not be before since")
    sessions = company.sessions.get(poll_id)
    if sessions is None:
        return json_response({"results": [], "next_id": ""})
    try:
        results, next_id = sessions.page(start_us, end_us, limit, request.query.get("after"))
    except BadCursor:
        raise _bad_request("after is not a cursor of this listing") from None
    return json_response({"results": results, "next_id": next_id})


async def list_agents(request: web.Request) -> web.Response:
    company = _authenticate(request)
    return json_response([agent.to_json() for agent in company.agents if agent.active])


async def deploy_legacy(request: web.Request) -> web.Response:
    world = request.app[WORLD]
    if not world.config.legacy_enabled:
        raise ServiceError(
            410,
            "gone",
            f"This endpoint was shut down on {LEGACY_SHUTDOWN}; "
            "use POST /v2/send-campaign/{poll_id} instead.",
        )
    company = _authenticate(request)
    poll_id = _poll_id(company, request.match_info["poll_id"])
    launch = world.launch(company, poll_id, _users(await _read_json(request)), "deploy_legacy")
    request.app[REPLIES].schedule(company, launch)
    last = max(d.taken_at for d in launch.deployments)
    return json_response(
        {
            "message": "Deployment scheduled.",
            "id": str(poll_id),
            "batch_id": launch.batch_id,
            "new_last_scheduleded_deployment": iso_time(last),
            "conversations_id": [launch.conversation_id(i) for i in range(len(launch.deployments))],
        }
    )


async def session_history(request: web.Request) -> web.Response:
    company = _authenticate(request)
    session_id = request.match_info["session_id"]
    record = request.app[WORLD].session(session_id, company)
    if record is None:
        raise ServiceError(404, "not_found", f"Session {session_id} not found.")
    return json_response(record.history)


async def list_polls(request: web.Request) -> web.Response:
    company = _authenticate(request)
    return json_response([{"id": pid, "name": name} for pid, name in company.polls.items()])


HANDLERS: dict[str, Handler] = {
    "send_campaign": send_campaign,
    "campaign_status": campaign_status,
    "update_session": update_session,
    "list_sessions": list_sessions,
    "list_agents": list_agents,
    "deploy_legacy": deploy_legacy,
    "session_history": session_history,
    "list_polls": list_polls,
}


# ---- assembly ---------------------------------------------------------------
def build_app(
    world: World, replies: Replies, faults: Faults, admin: Callable[[web.Application], None]
) -> web.Application:
    app = web.Application(
        middlewares=[service_middleware], client_max_size=world.config.max_body_size
    )
    app[WORLD] = world
    app[REPLIES] = replies
    app[FAULTS] = faults
    specs: dict[AbstractRoute, RouteSpec] = {}
    for spec in ROUTES:
        route = app.router.add_route(
            spec.method, PREFIXES[spec.host] + spec.path, HANDLERS[spec.name]
        )
        specs[route] = spec
    app[SPECS] = specs
    admin(app)
    return app
