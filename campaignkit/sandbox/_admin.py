"""Sandbox-only admin routes under ``/_sandbox/`` (no real endpoint uses it).

Tests and benchmarks check what the service received only through these.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from ._failures import RULE_FIELDS, InvalidFailure
from ._faults import InvalidFaults
from ._http import ServiceError, json_response
from ._keys import FAULTS, REPLIES, WORLD
from ._sessions import US
from ._state import Company, Launch, NotRepliable
from ._webhooks import KINDS, TEMPLATE_STATUSES, WebhookTargets, template_status_event

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


def _known(body: dict[str, Any], fields: tuple[str, ...]) -> None:
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise _invalid(f"unknown field {', '.join(unknown)} (known: {', '.join(fields)})")


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


async def get_failures(request: web.Request) -> web.Response:
    return json_response(request.app[WORLD].failures.to_json())


async def add_failure(request: web.Request) -> web.Response:
    """``{prefix, rate, status?, seed?}``: that share of the prefix's numbers
    fails from the next launch on (see ``_failures``); answers the rule."""
    body = await _body(request)
    _known(body, RULE_FIELDS)
    try:
        rule = request.app[WORLD].failures.set(body)
    except InvalidFailure as exc:
        raise _invalid(f"invalid failure rule: {exc}") from exc
    return json_response(rule)


async def delete_failures(request: web.Request) -> web.Response:
    failures = request.app[WORLD].failures
    failures.clear()
    return json_response(failures.to_json())


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

    Answers ``{session_external_id, created, webhook, closed}`` once the calls
    it caused were made: the response call and, when the flow ended, the
    conversation-closed call (each None without a URL for it).
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


def _url(value: Any, name: str) -> str:
    if not (isinstance(value, str) and value.startswith(("http://", "https://"))):
        raise _invalid(f"{name} must be an http(s) URL")
    return value


def _poll(company: Company, body: dict[str, Any]) -> int | None:
    poll_id = body.get("poll_id")
    if poll_id is not None and poll_id not in company.polls:
        raise ServiceError(404, "not_found", f"poll {poll_id} not found")
    return poll_id


async def set_webhook(request: web.Request) -> web.Response:
    """``{url?, kinds?, urls?: {kind: url}, headers?: {name: value}, poll_id?}``.

    ``url`` goes to every kind (or to ``kinds``), null removes them; ``urls``
    sets kinds one by one; ``headers`` replaces the static headers. With
    ``poll_id`` the settings are that poll's (it starts from the company's).
    """
    company = _company(request)
    body = await _body(request)
    poll_id = _poll(company, body)
    current = company.webhooks if poll_id is None else company.targets(poll_id)
    targets = WebhookTargets(dict(current.urls), dict(current.headers))
    kinds = body.get("kinds", list(KINDS))
    if not (isinstance(kinds, list) and set(kinds) <= set(KINDS)):
        raise _invalid(f"kinds must be a list of {', '.join(KINDS)}")
    if "url" in body:
        for kind in kinds:
            if body["url"] is None:
                targets.urls.pop(kind, None)
            else:
                targets.urls[kind] = _url(body["url"], "url")
    urls = body.get("urls", {})
    if not (isinstance(urls, dict) and set(urls) <= set(KINDS)):
        raise _invalid(f"urls must map {', '.join(KINDS)} to URLs")
    targets.urls |= {kind: _url(url, f"urls.{kind}") for kind, url in urls.items()}
    headers = body.get("headers", targets.headers)
    if not (
        isinstance(headers, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise _invalid("headers must map header names to text values")
    targets.headers = dict(headers)
    if poll_id is None:
        company.webhooks = targets
    else:
        company.poll_webhooks[poll_id] = targets
    return json_response({"company_id": company.id, "poll_id": poll_id, **targets.to_json()})


async def set_flow(request: web.Request) -> web.Response:
    """``{poll_id, questions: [text, ...]}``: what the poll's flow asks, in turn."""
    company = _company(request)
    body = await _body(request)
    poll_id = _poll(company, body)
    questions = body.get("questions")
    if poll_id is None or not (
        isinstance(questions, list) and questions and all(isinstance(q, str) for q in questions)
    ):
        raise _invalid("poll_id and questions (a non-empty list of texts) are required")
    company.flows[poll_id] = tuple(questions)
    return json_response({"company_id": company.id, "poll_id": poll_id, "questions": questions})


async def webhook_calls(request: web.Request) -> web.Response:
    """The calls the company's webhooks received, oldest first."""
    return json_response(_company(request).webhook_log)


async def session(request: web.Request) -> web.Response:
    """A session's variables and history (any company's)."""
    record = request.app[WORLD].session(request.match_info["session_id"])
    if record is None:
        raise ServiceError(404, "not_found", "session not found")
    return json_response(
        {
            "id": record.id,
            "poll_id": record.poll_id,
            "keys": record.keys,
            "types": record.types,
            "history": record.history,
        }
    )


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


_TEMPLATE_FIELDS = ("name", "status", "affected_conversation_ids", "event_id")


async def template_status(request: web.Request) -> web.Response:
    """``{name, status, affected_conversation_ids?, event_id?}``: a template's
    status changes; the published ``hsm.status`` event goes to the company's
    ``template_status`` URL.

    ``status`` is one of the published ``APPROVED``, ``REJECTED``, ``PAUSED``,
    ``DISABLED``, ``PENDING_DELETION``; the published event names no reason,
    so there is none to give. ``event_id`` (default: a new one) repeats an
    event, as a redelivery would. Answers ``{event, webhook}``: the body and
    the recorded call (None without a URL). The sandbox's deployments do not
    change with it.
    """
    company = _company(request)
    body = await _body(request)
    _known(body, _TEMPLATE_FIELDS)
    name, status = body.get("name"), body.get("status")
    if not (isinstance(name, str) and name.strip()):
        raise _invalid("name (the template's) must be a non-empty string")
    if status not in TEMPLATE_STATUSES:
        raise _invalid(f"status must be one of {', '.join(TEMPLATE_STATUSES)}, not {status!r}")
    affected = body.get("affected_conversation_ids", [])
    if not (
        isinstance(affected, list)
        and all(isinstance(i, int) and not isinstance(i, bool) for i in affected)
    ):
        raise _invalid("affected_conversation_ids must be a list of integers")
    event_id = body.get("event_id")
    if event_id is not None and not (isinstance(event_id, str) and event_id):
        raise _invalid("event_id must be a non-empty string")
    world = request.app[WORLD]
    event_id = event_id or world.event_id()
    event = template_status_event(event_id, world.clock.now(), status, name, affected)
    call = await request.app[REPLIES].account_event(company, "template_status", event)
    return json_response({"event": event, "webhook": call})


def add_admin_routes(app: web.Application) -> None:
    router = app.router
    router.add_get(f"{ADMIN_PREFIX}/state", state)
    router.add_get(f"{ADMIN_PREFIX}/faults", get_faults)
    router.add_put(f"{ADMIN_PREFIX}/faults", put_faults)
    router.add_delete(f"{ADMIN_PREFIX}/faults", delete_faults)
    router.add_get(f"{ADMIN_PREFIX}/failures", get_failures)
    router.add_post(f"{ADMIN_PREFIX}/failures", add_failure)
    router.add_delete(f"{ADMIN_PREFIX}/failures", delete_failures)
    router.add_get(f"{ADMIN_PREFIX}/clock", get_clock)
    router.add_put(f"{ADMIN_PREFIX}/clock", put_clock)
    router.add_post(f"{ADMIN_PREFIX}/reply", reply)
    router.add_post(f"{ADMIN_PREFIX}/companies", add_company)
    router.add_put(f"{ADMIN_PREFIX}/companies/{{company_id}}/webhook", set_webhook)
    router.add_put(f"{ADMIN_PREFIX}/companies/{{company_id}}/flow", set_flow)
    router.add_get(f"{ADMIN_PREFIX}/companies/{{company_id}}/webhook-calls", webhook_calls)
    router.add_post(f"{ADMIN_PREFIX}/companies/{{company_id}}/template-status", template_status)
    router.add_get(f"{ADMIN_PREFIX}/sessions/{{session_id}}", session)
    router.add_post(f"{ADMIN_PREFIX}/companies/{{company_id}}/sessions", add_sessions)
