"""The dashboard as an aiohttp.web app: server-rendered pages, live updates
as server-sent events, assets from the package (no build step, no CDN)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson
from aiohttp import web

from .. import errors
from .._redaction import redact
from ._dashboard import Dashboard
from ._html import asset, document, launch_body, launch_parts, launches_html
from ._report import render_report
from ._watch import Signal

if TYPE_CHECKING:
    pass

__all__ = ["DASHBOARD", "dashboard_app", "running_dashboard", "serve_dashboard"]

DASHBOARD = web.AppKey("dashboard", Dashboard)
ASSETS = {"dashboard.css": "text/css", "dashboard.js": "text/javascript"}
HEAD = (
    '<link rel="stylesheet" href="/static/dashboard.css">'
    '<script src="/static/dashboard.js" defer></script>'
)
TOP = '<header class="top"><a href="/">campaignkit · dashboard</a></header>'


def dashboard_app(dashboard: Dashboard) -> web.Application:
    """The web application of ``dashboard`` (a :class:`Dashboard` of a client's
    launches). ``dashboard.add(id)`` shows one more; opening ``/launches/ID``
    does too. The client stays the caller's to close."""
    app = web.Application()
    app[DASHBOARD] = dashboard

    async def start(app: web.Application) -> None:
        await dashboard.start()

    async def stop(app: web.Application) -> None:
        await dashboard.close()

    app.on_startup.append(start)
    app.on_shutdown.append(stop)  # before aiohttp waits for the open streams
    app.router.add_get("/", index)
    app.router.add_get("/events", index_events)
    app.router.add_get("/launches/{launch}", launch_page)
    app.router.add_get("/launches/{launch}/events", launch_events)
    app.router.add_get("/launches/{launch}/report.html", launch_report)
    app.router.add_get("/static/{name}", static)
    return app


async def index(request: web.Request) -> web.Response:
    dashboard = request.app[DASHBOARD]
    await dashboard.refresh()
    body = (
        f'{TOP}<main data-events="/events"><h1>Launches</h1>'
        f'<section id="launches">{launches_html(dashboard.summaries())}</section></main>'
    )
    return _html(document("campaignkit dashboard", body, head=HEAD))


async def index_events(request: web.Request) -> web.StreamResponse:
    dashboard = request.app[DASHBOARD]

    def render() -> dict[str, Any]:
        summaries = dashboard.summaries()
        return {
            "launches": [
                {
                    "launch_request_id": s.launch_request_id,
                    "state": s.state,
                    "funnel": s.funnel.to_json(),
                }
                for s in summaries
            ],
            "html": {"launches": launches_html(summaries)},
        }

    return await _stream(request, dashboard.signal, render, before=dashboard.refresh)


async def launch_page(request: web.Request) -> web.Response:
    launch = request.match_info["launch"]
    watch = request.app[DASHBOARD].add(launch)
    path = f"/launches/{quote(launch, safe='')}"
    note = f'<p class="note"><a href="{escape(path)}/report.html">Download the report</a></p>'
    body = launch_body(watch.summary, watch.timeline.samples, events=f"{path}/events", note=note)
    return _html(document(f"Campaign {launch}", TOP + body, head=HEAD))


async def launch_events(request: web.Request) -> web.StreamResponse:
    watch = request.app[DASHBOARD].add(request.match_info["launch"])

    def render() -> dict[str, Any]:
        summary = watch.summary
        return {
            "launch_request_id": summary.launch_request_id,
            "state": summary.state,
            "finished": watch.finished,
            "error": summary.error,
            "funnel": summary.funnel.to_json(),
            "html": launch_parts(summary, watch.timeline.samples),
        }

    return await _stream(request, watch.signal, render)


async def launch_report(request: web.Request) -> web.Response:
    dashboard = request.app[DASHBOARD]
    launch = request.match_info["launch"]
    watch = dashboard.add(launch)
    try:
        status = watch.status or await dashboard.client.get_campaign_status(launch)
    except errors.CampaignKitError as exc:
        raise web.HTTPBadGateway(text=f"reading launch {launch!r} failed: {exc}") from exc
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in launch)
    return _html(
        render_report(status, watch.timeline.samples),
        headers={"Content-Disposition": f'attachment; filename="campaign-{safe_name}.html"'},
    )


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in ASSETS:
        raise web.HTTPNotFound()
    return web.Response(text=asset(name), content_type=ASSETS[name], charset="utf-8")


def _html(text: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(text=text, content_type="text/html", charset="utf-8", headers=headers)


async def _stream(
    request: web.Request,
    signal: Signal,
    render: Callable[[], dict[str, Any]],
    *,
    before: Callable[[], Awaitable[None]] | None = None,
) -> web.StreamResponse:
    """Server-sent events: the rendered state after every change, a comment
    line otherwise every ``discover_every`` seconds, until the client leaves
    or the dashboard closes."""
    dashboard = request.app[DASHBOARD]
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    seen: int | None = None
    with contextlib.suppress(ConnectionResetError):
        while not dashboard.closed:
            if before is not None:
                await before()
            if signal.version != seen:
                seen = signal.version
                data = redact(orjson.dumps(render()).decode())
                await response.write(f"data: {data}\n\n".encode())
            else:
                await response.write(b": idle\n\n")
            await signal.wait(seen, dashboard.discover_every)
    return response


@contextlib.asynccontextmanager
async def running_dashboard(
    dashboard: Dashboard, host: str = "127.0.0.1", port: int = 8766
) -> AsyncIterator[Dashboard]:
    """Serve ``dashboard`` while in the block (``port=0``: a free one); yields
    it, its ``url`` set."""
    app = dashboard_app(dashboard)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        dashboard.url = f"http://{host}:{runner.addresses[0][1]}/"
        yield dashboard
    finally:
        await runner.cleanup()


async def serve_dashboard(
    dashboard: Dashboard,
    host: str = "127.0.0.1",
    port: int = 8766,
    *,
    on_ready: Callable[[Dashboard], object] | None = None,
) -> None:
    """Serve ``dashboard`` until cancelled; ``on_ready`` is called once it listens."""
    async with running_dashboard(dashboard, host, port):
        if on_ready is not None:
            on_ready(dashboard)
        await asyncio.Event().wait()
