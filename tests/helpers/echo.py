"""A real aiohttp server standing for a service, gateway or proxy that echoes
the request's ``Authorization`` header back in its answers, in each way seen
in the wild: as is, percent-encoded, base64-encoded, cut short, or only its
middle part; in a ``{detail}``, an ``{error, message}``, a text or an HTML
body, or inside a 200 answer's data."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from urllib.parse import quote

import orjson
from aiohttp import web

from helpers.servers import serving

ECHOES: dict[str, Callable[[str], str]] = {
    "raw": lambda auth: f"bad header Authorization: {auth}",
    "percent": lambda auth: f"rejected authorization={quote(auth, safe='')}",
    "base64": lambda auth: (
        "rejected " + base64.b64encode(f"Authorization: {auth}".encode()).decode()
    ),
    "cut": lambda auth: f"unknown key {auth[:-6]}...",
    "middle": lambda auth: f"key ...{auth[10:30]}... revoked",
}
SHAPES = ("detail", "error", "text", "html", "status")


class Echo:
    """What the server answers next: ``status``, ``shape`` (one of
    :data:`SHAPES`; ``"status"`` is a campaign status whose
    ``launch_request_id`` carries the echo) and ``echo`` (one of
    :data:`ECHOES`). ``seen`` counts the requests that carried the header."""

    def __init__(self) -> None:
        self.status = 500
        self.shape = "detail"
        self.echo = "raw"
        self.seen = 0
        self.url = ""

    def said(self, request: web.Request) -> str:
        auth = request.headers.get("Authorization", "")
        self.seen += bool(auth)
        return ECHOES[self.echo](auth)

    async def handle(self, request: web.Request) -> web.Response:
        said = self.said(request)
        headers = {"Location": f"{self.url}/elsewhere"} if 300 <= self.status < 400 else {}
        if self.shape == "text":
            return web.Response(status=self.status, text=said, headers=headers)
        if self.shape == "html":
            html = f"<html><body><h1>{self.status}</h1><p>{said}</p></body></html>"
            return web.Response(
                status=self.status, text=html, content_type="text/html", headers=headers
            )
        payload = {
            "detail": {"detail": said},
            "error": {"error": "unauthorized", "message": said},
            "status": {
                "launch_request_id": said,
                "status": "DONE",
                "poll_id": 1,
                "deployments": [
                    {
                        "conversation_id": "c",
                        "service_id": said,
                        "cellphone": "1",
                        "status": "DELIVERED",
                    }
                ],
            },
        }[self.shape]
        return web.Response(
            status=self.status,
            body=orjson.dumps(payload),
            content_type="application/json",
            headers=headers,
        )


@asynccontextmanager
async def echo_server() -> AsyncIterator[Echo]:
    """An :class:`Echo` serving every path on a free loopback port."""
    echo = Echo()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo.handle)
    async with serving(app) as url:
        echo.url = url
        yield echo
