"""The dashboard's front page: bulk runs (from a ledger), each one row with
its launches inside, then the launches of no run, a page at a time."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from html import escape
from urllib.parse import quote

import attrs

from .._funnel import Funnel as RunFunnel
from ..ledger import IN_FLIGHT, PLANNED
from ..progress import ProgressUpdate, failure_words, percent, run_update
from ._funnel import Funnel
from ._html import LaunchSummary, legend_html, moment, poll_label, stack_bar, state_html

__all__ = [
    "PAGE_SIZE",
    "Listing",
    "RunSummary",
    "listing_html",
    "outcomes_html",
    "run_head_html",
    "run_launches_html",
    "total_funnel",
]

PAGE_SIZE = 20
"""Rows (runs, and launches of no run) on one page of the list."""

OPEN_UP_TO = 10
"""A run's launches are shown unfolded up to this many."""


@attrs.frozen
class RunSummary:
    """One bulk run: the ledger's counts and its launches (followed ones as
    summaries, the others by id)."""

    run: str
    poll_id: int | None
    poll_name: str | None
    created: datetime
    counts: Mapping[str, int]
    input_done: bool
    launches: tuple[LaunchSummary | str, ...] = ()
    outcomes: RunFunnel | None = None
    """The run's funnel from the ledger (outcomes written by ``follow`` and
    the webhooks), the numbers ``campaignkit runs`` shows."""

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def update(self) -> ProgressUpdate:
        """Its progress in the words every screen uses (``sent``: accepted
        by the service, less those its outcomes know delivered or failed)."""
        settled = self.input_done and not (self.counts.get(PLANNED) or self.counts.get(IN_FLIGHT))
        return run_update(self.counts, None, settled, self.outcomes)


@attrs.frozen
class Listing:
    """One page of the list (``page`` of ``pages``, from 1)."""

    runs: tuple[RunSummary, ...]
    launches: tuple[LaunchSummary | str, ...]
    """Launches of no run listed, newest first (followed ones as summaries)."""
    page: int = 1
    pages: int = 1


def total_funnel(funnels: Sequence[Funnel]) -> Funnel:
    """The funnels of several launches added up."""
    failures: dict[str, int] = {}
    for one in funnels:
        for reason, count in one.failures:
            failures[reason] = failures.get(reason, 0) + count
    return Funnel(
        sum(f.waiting for f in funnels),
        sum(f.sent for f in funnels),
        sum(f.delivered for f in funnels),
        sum(f.unknown for f in funnels),
        tuple(sorted(failures.items(), key=lambda item: (-item[1], item[0]))),
    )


def _link(launch_request_id: str, link: bool = True) -> str:
    """The launch's id, a link to its page (``link``; not in a report file)."""
    code = f"<code>{escape(launch_request_id)}</code>"
    if not link:
        return code
    return f'<a href="/launches/{escape(quote(launch_request_id, safe=""))}">{code}</a>'


def _shares(update: ProgressUpdate, told: Collection[str] = ()) -> str:
    """Every non-empty stage with its count and share (in words on hover),
    then the failures in words (but those ``told`` elsewhere)."""
    stages = " · ".join(
        f'<span class="share" data-stage="{stage}" data-n="{n}" '
        f'title="{escape(stage.description)}">{stage} {n} ({percent(n, update.total)})</span>'
        for stage, n in update.stages().items()
    )
    failures = "".join(
        f"<br>{n} {escape(failure_words(name))} <code>{escape(name)}</code>"
        for name, n in update.failures
        if name not in told
    )
    return stages + failures


def _launch_row(summary: LaunchSummary, link: bool = True) -> str:
    funnel = summary.funnel
    stages = " · ".join(
        f'<span class="share">{stage} {count} ({percent(count, funnel.total)})</span>'
        for stage, count in funnel.stages()
        if count
    )
    return (
        f'<tr data-launch="{escape(summary.launch_request_id)}">'
        f"<td>{_link(summary.launch_request_id, link)}<br>"
        f"{poll_label(summary.poll_id, summary.poll_name)}</td>"
        f"<td>{moment(summary.since)}</td><td>{state_html(summary)}</td>"
        f"<td>{funnel.total}</td><td>{stack_bar(funnel)}<br><small>{stages}</small></td></tr>"
    )


def _row(launch: LaunchSummary | str, link: bool = True) -> str:
    """A followed launch's row, or a link to follow one."""
    if isinstance(launch, LaunchSummary):
        return _launch_row(launch, link)
    return (
        f'<tr data-launch="{escape(launch)}"><td>{_link(launch)}</td>'
        '<td colspan="4" class="none">not followed: open it to follow it</td></tr>'
    )


def run_head_html(run: RunSummary) -> str:
    """A run's poll, start, recipients, shares and funnel: the top of its row
    on the dashboard, and of its report."""
    followed = [launch for launch in run.launches if isinstance(launch, LaunchSummary)]
    delivery = total_funnel([launch.funnel for launch in followed])
    delivered = (
        f"<p>delivery of the {len(followed)} launch(es) followed: {stack_bar(delivery)} "
        f"{delivery.delivered} delivered of {delivery.total} "
        f"({percent(delivery.delivered, delivery.total)})</p>"
        if followed
        else ""
    )
    input_state = "" if run.input_done else " (input still being read)"
    outcomes = "" if run.outcomes is None else outcomes_html(run.outcomes)
    told = () if run.outcomes is None or not outcomes else run.outcomes.failed  # in the funnel
    return (
        f"<h2>Run <code>{escape(run.run)}</code>: {poll_label(run.poll_id, run.poll_name)}</h2>"
        f"<p>started {moment(run.created)} · {run.total} recipients{input_state}<br>"
        f"{_shares(run.update, told)}</p>{outcomes}{delivered}"
    )


def run_launches_html(run: RunSummary, *, links: bool = True) -> str:
    """The run's launches, folded when many; ``links`` to their pages."""
    inside = "".join(_row(launch, links) for launch in run.launches)
    return (
        f'<details class="launches"{" open" if len(run.launches) <= OPEN_UP_TO else ""}>'
        f"<summary>{len(run.launches)} launch(es)</summary>"
        f'<table class="launches">{_HEADER}{inside}</table></details>'
    )


def _run_html(run: RunSummary) -> str:
    """The run's row: its head, the download of its report, its launches."""
    report = f"/runs/{quote(run.run, safe='')}/report.html"
    return (
        f'<section class="run" data-run="{escape(run.run)}">{run_head_html(run)}'
        f'<p class="note"><a href="{escape(report)}">Download the report</a></p>'
        f"{run_launches_html(run)}</section>"
    )


def outcomes_html(funnel: RunFunnel) -> str:
    """The run's funnel as the ledger has it: each step with its share of the
    planned recipients, then the opt-outs and the failures by status."""
    if not funnel.accepted:
        return ""
    steps = " → ".join(
        f'<span class="step" data-step="{name}" data-n="{n}">{name} {n} '
        f"({percent(n, funnel.planned)})</span>"
        for name, n in funnel.steps
    )
    failed = "".join(
        f"<br>{n} {escape(failure_words(status))} <code>{escape(status)}</code>"
        for status, n in sorted(funnel.failed.items(), key=lambda item: (-item[1], item[0]))
    )
    opted = f" · opted out {funnel.opted_out}" if funnel.opted_out else ""
    return f'<p class="funnel">funnel: {steps}{opted}{failed}</p>'


_HEADER = (
    "<tr><th>launch, poll</th><th>watched since</th><th>state</th><th>deployments</th>"
    "<th>stages</th></tr>"
)


def _pager(page: int, pages: int) -> str:
    if pages <= 1:
        return ""
    newer = f'<a href="/?page={page - 1}" rel="prev">newer</a>' if page > 1 else "newer"
    older = f'<a href="/?page={page + 1}" rel="next">older</a>' if page < pages else "older"
    return f'<nav class="pager">{newer} · page {page} of {pages} · {older}</nav>'


def listing_html(listing: Listing) -> str:
    """The page: a legend, the runs, the launches of no run, the pager."""
    runs = "".join(_run_html(run) for run in listing.runs)
    rows = "".join(map(_row, listing.launches))
    launches = (
        f'<section><h2>Launches</h2><table class="launches">{_HEADER}{rows}</table></section>'
        if rows
        else ""
    )
    if not runs and not launches:
        empty = (
            '<p class="none">No launch yet: send a campaign, or open /launches/ID.</p>'
            if listing.page == 1
            else '<p class="none">Nothing on this page.</p>'
        )
        return empty + _pager(listing.page, listing.pages)
    legend = f'<section class="key"><h2>Stages</h2>{legend_html()}</section>'
    return legend + runs + launches + _pager(listing.page, listing.pages)
