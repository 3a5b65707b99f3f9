"""Watching campaigns in a browser: a live dashboard (aiohttp, server-sent
events, inline SVG, everything served from the package) and the same funnel
and chart as a self-contained HTML report.

- ``_stages``: a launch's deployments per stage (:class:`LaunchStages`), in the
  words of :mod:`campaignkit.status`; a run's funnel is :class:`campaignkit.Funnel`.
- ``_timeline``, ``_svg``, ``_html``: samples over time, the chart, the fragments;
  ``_listing``: the front page (bulk runs with their launches, paged).
- ``_report``, ``_run_report``: the report files (of a launch, of a bulk run);
  ``_watch``, ``_dashboard``, ``_app``: the live part; ``_guard``: who may use
  it (host, token, origin checks, security headers).
"""

from typing import TYPE_CHECKING

from .._deprecated import renamed
from ._app import DASHBOARD, dashboard_app, running_dashboard, serve_dashboard
from ._dashboard import Dashboard, Discover, UnknownLaunch, UnknownRun, sandbox_launches
from ._guard import Access
from ._html import LaunchSummary, asset, bars_html, document, moment
from ._listing import Listing, RunSummary
from ._report import (
    follow_report,
    launch_sent,
    ledger_history,
    render_report,
    run_of,
    run_start,
    write_file,
    write_report,
)
from ._run_report import read_run_report, render_run_report, write_run_report
from ._runs import PollNames, poll_id
from ._stages import LaunchStages, Stage, launch_stages, stage_of
from ._svg import stacked_chart_svg
from ._timeline import Sample, Timeline
from ._watch import Watch

__all__ = [
    # The pieces the pages are drawn with, for reports drawn alike (a poll's analysis):
    "asset",
    "bars_html",
    "document",
    "moment",
    "stacked_chart_svg",
    "write_file",
    # The names of the polls (read from the service), and a run's poll as its id:
    "PollNames",
    "poll_id",
    # The dashboard, its reports, what they show:
    "DASHBOARD",
    "Access",
    "Dashboard",
    "Discover",
    "LaunchStages",
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
    "launch_sent",
    "launch_stages",
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

if TYPE_CHECKING:
    Funnel = LaunchStages
    funnel = launch_stages
else:
    __getattr__ = renamed(
        __name__,
        {
            "Funnel": ("campaignkit.dashboard.LaunchStages", LaunchStages),
            "funnel": ("campaignkit.dashboard.launch_stages", launch_stages),
        },
    )
