"""The dashboard and a raw aiohttp app in one process of their own, for row 13.

``python -m benchmarks._dashboard_server --port N --users U`` sends a campaign
of ``U`` users to an in-process sandbox, waits until it is done, then serves
the dashboard following it on a port of the system's choosing and, on port
``N`` (last, so that a listening ``N`` means both are up), a bare aiohttp
app answering the same launch page as prebuilt bytes (the floor), its id at
``/launch`` and the dashboard's base URL at ``/dashboard``.
"""

from __future__ import annotations

import argparse
import asyncio

import aiohttp
from aiohttp import web

from campaignkit import User
from campaignkit.dashboard import Dashboard, dashboard_app
from campaignkit.sandbox import Sandbox


async def _listen(app: web.Application, port: int) -> str:
    """Serve ``app`` on ``port`` (0: a free one); its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    return site.name


async def serve(port: int, users: int) -> None:
    async with Sandbox(speed=1000) as sandbox, sandbox.client() as client:
        polls = await client.list_polls()
        people = [User(cellphone=f"300{i:07d}", country_code="+57") for i in range(users)]
        launch = (await client.send_campaign(polls[0].id, people)).launch_request_id
        async for _ in client.track(launch, until="settled", poll_interval=0.05):
            pass
        dashboard = Dashboard(client, launches=[launch], poll_interval=0.05, max_interval=5)
        # Bound by the system: a port guessed next to ``port`` may be taken.
        dashboard_base = await _listen(dashboard_app(dashboard), 0)
        await asyncio.sleep(1)  # the watch's first polls
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{dashboard_base}/launches/{launch}") as response,
        ):
            body = await response.read()

        async def prebuilt(_: web.Request) -> web.Response:
            return web.Response(body=body, content_type="text/html", charset="utf-8")

        async def launch_id(_: web.Request) -> web.Response:
            return web.Response(text=launch)

        async def dashboard_url(_: web.Request) -> web.Response:
            return web.Response(text=dashboard_base)

        raw = web.Application()
        raw.router.add_get(f"/launches/{launch}", prebuilt)
        raw.router.add_get("/launch", launch_id)
        raw.router.add_get("/dashboard", dashboard_url)
        await _listen(raw, port)
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--users", type=int, default=1000)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.users))


if __name__ == "__main__":
    main()
