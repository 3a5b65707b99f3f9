"""Watching campaigns in a browser: a live dashboard (aiohttp, server-sent
events, inline SVG, everything served from the package) and the same funnel
and chart as a self-contained HTML report.

- ``_funnel``: deployments per stage, in the words of :mod:`campaignkit.status`.
- ``_timeline``, ``_svg``, ``_html``: samples over time, the chart, the fragments;
  ``_listing``: the front page (bulk runs with their launches, paged).
- ``_report``, ``_run_report``: the report files (of a launch, of a bulk run);
  ``_watch``, ``_dashboard``, ``_app``: the live part; ``_guard``: who may use
  it (host, token, origin checks, security headers).
"""

from ._app import DASHBOARD, dashboard_app, running_dashboard, serve_dashboard
from ._dashboard import Dashboard, Discover, UnknownLaunch, UnknownRun, sandbox_launches
from ._funnel import Funnel, Stage, funnel, stage_of
from ._guard import Access
from ._html import LaunchSummary
from ._listing import Listing, RunSummary
from ._report import (
    follow_report,
    launch_sent,
    ledger_history,
    render_report,
    run_of,
    run_start,
    write_report,
)
from ._run_report import read_run_report, render_run_report, write_run_report
from ._timeline import Sample, Timeline
from ._watch import Watch

__all__ = [
    "DASHBOARD",
    "Access",
    "Dashboard",
    "Discover",
    "Funnel",
    "LaunchSummary",
    "Listing",
    "RunSummary",
    "Sample",
    "Stage",
    "Timeline",
    "UnknownLaunch",
    "UnknownRun",
    "Watch",
    "dashboard_app",
    "follow_report",
    "funnel",
    "launch_sent",
    "ledger_history",
    "read_run_report",
    "render_report",
    "render_run_report",
    "run_of",
    "run_start",
    "running_dashboard",
    "sandbox_launches",
    "serve_dashboard",
    "stage_of",
    "write_report",
    "write_run_report",
]
