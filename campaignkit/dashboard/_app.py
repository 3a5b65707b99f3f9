"""The dashboard as an aiohttp.web app: server-rendered pages, live updates
as server-sent events, assets from the package (no build step, no CDN)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from html import escape
from typing import Any
from urllib.parse import quote

import orjson
from aiohttp import web

from .. import errors
from .._redaction import redact, sdk_logger
from ._dashboard import Dashboard, UnknownLaunch, UnknownRun
from ._guard import Access, secure_headers
from ._html import asset, document, launch_body, launch_parts
from ._listing import listing_html
from ._report import render_report
from ._watch import Signal, Watch

__all__ = ["DASHBOARD", "dashboard_app", "running_dashboard", "serve_dashboard"]

DASHBOARD = web.AppKey("dashboard", Dashboard)
ASSETS = {"dashboard.css": "text/css", "dashboard.js": "text/javascript"}
HEAD = (
    '<link rel="stylesheet" href="/static/dashboard.css">'
    '<script src="/static/dashboard.js" defer></script>'
)
TOP = '<header class="top"><a href="/">campaignkit · dashboard</a></header>'

log = sdk_logger("campaignkit.dashboard")


REPORT_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"


def dashboard_app(dashboard: Dashboard, access: Access | None = None) -> web.Application:
    """The web application of ``dashboard`` (a :class:`Dashboard` of a client's
    launches). ``dashboard.add(id)`` shows one more; opening ``/launches/ID``
    does too, if the service knows it. ``access`` says who may use it
    (default: no token, loopback names and IP literals only). The client
    stays the caller's to close."""
    access = access or Access()
    app = web.Application(middlewares=[access.middleware, _ledger_failures])
    app[DASHBOARD] = dashboard
    app.on_response_prepare.append(secure_headers)

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
    app.router.add_get("/runs/{run}/report.html", run_report)
    app.router.add_get("/static/{name}", static)
    return app


@web.middleware
async def _ledger_failures(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """A page whose ledger read fails (a closed file, a lost server) says so, a 503."""
    try:
        return await handler(request)
    except errors.LedgerError as exc:
        log.warning("dashboard: %s: the ledger failed: %s", request.raw_path, exc)
        raise web.HTTPServiceUnavailable(
            text=redact(f"the dashboard's ledger could not be read: {exc}")
        ) from None


def _page(request: web.Request) -> int:
    value = request.query.get("page", "1")
    return int(value) if value.isdigit() and len(value) < 7 else 1


async def index(request: web.Request) -> web.Response:
    page = _page(request)
    listing = await request.app[DASHBOARD].listing(page)
    body = (
        f'{TOP}<main data-events="/events?page={listing.page}"><h1>Campaigns</h1>'
        f'<div id="launches">{listing_html(listing)}</div></main>'
    )
    return _html(document("campaignkit dashboard", body, head=HEAD))


async def index_events(request: web.Request) -> web.StreamResponse:
    dashboard = request.app[DASHBOARD]
    page = _page(request)

    async def render() -> dict[str, Any]:
        listing = await dashboard.listing(page)
        return {
            "runs": [
                {"run": r.run, "counts": dict(r.counts), "launches": len(r.launches)}
                for r in listing.runs
            ],
            "launches": [
                {"launch_request_id": s, "state": None, "funnel": None}
                if isinstance(s, str)
                else {
                    "launch_request_id": s.launch_request_id,
                    "state": s.state,
                    "funnel": s.stages.to_json(),
                }
                for s in listing.launches
            ],
            "html": {"launches": listing_html(listing)},
        }

    return await _stream(request, dashboard.signal, render)


async def followed(request: web.Request) -> Watch:
    """The watch of the page's launch: 404 if the service does not know it."""
    launch = request.match_info["launch"]
    try:
        return await request.app[DASHBOARD].follow(launch)
    except UnknownLaunch:
        raise web.HTTPNotFound(text=redact(f"no launch {launch!r} for this API key")) from None
    except errors.CampaignKitError as exc:
        raise web.HTTPBadGateway(text=redact(f"reading launch {launch!r} failed: {exc}")) from exc


async def launch_page(request: web.Request) -> web.Response:
    watch = await followed(request)
    launch = watch.launch_request_id
    path = f"/launches/{quote(launch, safe='')}"
    note = f'<p class="note"><a href="{escape(path)}/report.html">Download the report</a></p>'
    summary = await request.app[DASHBOARD].named(watch)
    body = launch_body(summary, watch.timeline.samples, events=f"{path}/events", note=note)
    title = f"{summary.poll_name or 'Campaign'} {launch}"
    return _html(document(title, TOP + body, head=HEAD))


async def launch_events(request: web.Request) -> web.StreamResponse:
    dashboard = request.app[DASHBOARD]
    watch = await followed(request)

    async def render() -> dict[str, Any]:
        summary = await dashboard.named(watch)
        return {
            "launch_request_id": summary.launch_request_id,
            "state": summary.state,
            "finished": watch.finished,
            "error": summary.error,
            "funnel": summary.stages.to_json(),
            "html": launch_parts(summary, watch.timeline.samples),
        }

    return await _stream(request, watch.signal, render, until=lambda: watch.dropped)


async def launch_report(request: web.Request) -> web.Response:
    dashboard = request.app[DASHBOARD]
    watch = await followed(request)
    launch = watch.launch_request_id
    try:
        status = watch.status or await dashboard.client.get_campaign_status(launch)
    except errors.CampaignKitError as exc:
        raise web.HTTPBadGateway(text=redact(f"reading launch {launch!r} failed: {exc}")) from exc
    text = render_report(
        status,
        watch.timeline.samples,
        poll_name=(await dashboard.named(watch)).poll_name,
        sent=dashboard.launch_sent(launch),
    )
    return _attachment(text, f"campaign-{launch}")


async def run_report(request: web.Request) -> web.Response:
    """The report of a bulk run of the dashboard's ledger, from the ledger alone."""
    run = request.match_info["run"]
    try:
        text = await request.app[DASHBOARD].run_report(run)
    except UnknownRun:
        raise web.HTTPNotFound(text=redact(f"no run {run!r} in this dashboard's ledger")) from None
    return _attachment(text, f"run-{run}")


def _attachment(text: str, name: str) -> web.Response:
    """A report as a download: ``name`` (made safe for a file name) ``.html``,
    under the report's policy (no script, nothing fetched)."""
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return _html(
        text,
        headers={
            "Content-Disposition": f'attachment; filename="{safe_name}.html"',
            "Content-Security-Policy": REPORT_POLICY,
        },
    )


async def static(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    if name not in ASSETS:
        raise web.HTTPNotFound()
    return web.Response(text=asset(name), content_type=ASSETS[name], charset="utf-8")


def _html(text: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(text=text, content_type="text/html", charset="utf-8", headers=headers)


def event(payload: dict[str, Any]) -> bytes:
    """One server-sent event, the key redacted: the single point every
    streamed byte goes through."""
    return f"data: {redact(orjson.dumps(payload).decode())}\n\n".encode()


async def _stream(
    request: web.Request,
    signal: Signal,
    render: Callable[[], Awaitable[dict[str, Any]]],
    *,
    until: Callable[[], bool] = lambda: False,
) -> web.StreamResponse:
    """Server-sent events: the rendered state whenever it differs from the
    last one sent (looked at on every change and every ``discover_every``
    seconds), a comment line otherwise, until the client leaves, the
    dashboard closes or ``until()`` holds."""
    dashboard = request.app[DASHBOARD]
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    sent = b""
    with contextlib.suppress(ConnectionResetError):
        while not (dashboard.closed or until()):
            seen = signal.version
            data = event(await render())
            await response.write(b": idle\n\n" if data == sent else data)
            sent = data
            await signal.wait(seen, dashboard.discover_every)
    return response


@contextlib.asynccontextmanager
async def running_dashboard(
    dashboard: Dashboard,
    host: str = "127.0.0.1",
    port: int = 8766,
    *,
    token: str | None = None,
    allow_hosts: Iterable[str] = (),
) -> AsyncIterator[Dashboard]:
    """Serve ``dashboard`` while in the block (``port=0``: a free one); yields
    it, its ``url`` set (with ``?token=`` when it has one). Bound beyond
    loopback it requires ``token`` (a new random one if not given);
    ``allow_hosts``: more names its address may be reached by."""
    access = Access.for_bind(host, token, allow_hosts)
    app = dashboard_app(dashboard, access)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        name = f"[{host}]" if ":" in host else host
        query = "" if access.token is None else f"?token={access.token}"
        dashboard.url = f"http://{name}:{runner.addresses[0][1]}/{query}"
        yield dashboard
    finally:
        await runner.cleanup()


async def serve_dashboard(
    dashboard: Dashboard,
    host: str = "127.0.0.1",
    port: int = 8766,
    *,
    token: str | None = None,
    allow_hosts: Iterable[str] = (),
    on_ready: Callable[[Dashboard], object] | None = None,
) -> None:
    """Serve ``dashboard`` until cancelled (as :func:`running_dashboard`);
    ``on_ready`` is called once it listens."""
    async with running_dashboard(dashboard, host, port, token=token, allow_hosts=allow_hosts):
        if on_ready is not None:
            on_ready(dashboard)
        await asyncio.Event().wait()
