"""Row 14's servers, in a process of their own: ``webhook_handler`` at
``POST /webhook`` and, at ``POST /raw``, a bare aiohttp handler that parses
the same JSON and answers the same body (the floor), in one application.

``python -m benchmarks._webhook_server --port N``
"""

from __future__ import annotations

import argparse

import orjson
from aiohttp import web

from campaignkit.webhooks import WebhookEvent, webhook_handler

EMPTY = orjson.dumps({"user_session_keys": []})


async def raw(request: web.Request) -> web.Response:
    orjson.loads(await request.read())
    return web.Response(body=EMPTY, content_type="application/json")


async def on_event(event: WebhookEvent) -> None:
    return None


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_post("/raw", raw)
    webhook_handler(on_event).install(app, "/webhook")
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(make_app(), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
