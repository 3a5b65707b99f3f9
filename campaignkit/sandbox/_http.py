"""Route table, error shapes and JSON responses shared by the handlers."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any, Literal

import attrs
import orjson
from aiohttp import web

__all__ = [
    "ROUTES",
    "RouteSpec",
    "ServiceError",
    "Shape",
    "error_response",
    "json_response",
]

Shape = Literal["detail", "error"]


@attrs.frozen
class RouteSpec:
    """A spec endpoint: where it lives, its error shape and answer type."""

    name: str
    method: str
    host: Literal["main", "campaign", "agent"]
    path: str
    shape: Shape
    returns: Literal["object", "list"]


ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec(
        "send_campaign", "POST", "campaign", "/v2/send-campaign/{poll_id}", "detail", "object"
    ),
    # The spec's 400 says the poll id may come "in the URL or in the body".
    RouteSpec("send_campaign", "POST", "campaign", "/v2/send-campaign", "detail", "object"),
    RouteSpec(
        "campaign_status",
        "GET",
        "campaign",
        "/v2/send-campaign/{launch_request_id}",
        "detail",
        "object",
    ),
    RouteSpec(
        "update_session", "POST", "main", "/session/{session_external_id}/update", "error", "object"
    ),
    RouteSpec("list_sessions", "GET", "main", "/devapi/poll/{poll_id}/sessions", "error", "object"),
    RouteSpec("list_agents", "GET", "agent", "/agent/company/agents", "error", "list"),
    RouteSpec("deploy_legacy", "POST", "main", "/deployment/api/poll/{poll_id}", "error", "object"),
    RouteSpec(
        "session_history", "GET", "main", "/devapi/session/{session_id}/history", "error", "list"
    ),
    RouteSpec("list_polls", "GET", "main", "/poll/api/all", "error", "list"),
)
ROUTE_NAMES = frozenset(spec.name for spec in ROUTES)


class ServiceError(Exception):
    """An error answer: rendered as ``{detail}`` or ``{error, message}`` by route."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        spanish: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.spanish = spanish
        self.headers = headers or {}

    @classmethod
    def http(cls, status: int, headers: dict[str, str] | None = None) -> ServiceError:
        """A generic error for a status code (used by fault injection)."""
        phrase = HTTPStatus(status).phrase
        code = phrase.lower().replace(" ", "_")
        return cls(status, code, phrase, f"Error del servicio: {phrase}", headers)


def json_response(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(data), status=status, content_type="application/json")


def error_response(request: web.Request, shape: Shape, error: ServiceError) -> web.Response:
    if shape == "detail":
        spanish = request.headers.get("Accept-Language", "").lower().startswith("es")
        body: dict[str, str] = {
            "detail": error.spanish if spanish and error.spanish else error.message
        }
    else:
        body = {"error": error.code, "message": error.message}
    response = json_response(body, error.status)
    response.headers.update(error.headers)
    return response
