"""The dashboard's front page: bulk runs (from a ledger), each one row with
its launches inside, then the launches of no run, a page at a time."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from urllib.parse import quote

import attrs

from .._funnel import Funnel, build_funnel
from ..ledger import IN_FLIGHT, PLANNED, RunPause, Stall
from ..progress import ProgressUpdate, failure_words, run_update
from ._html import (
    LaunchSummary,
    legend_html,
    moment,
    poll_label,
    sent_html,
    share,
    stack_bar,
    state_html,
)
from ._stages import LaunchStages

__all__ = [
    "PAGE_SIZE",
    "Listing",
    "RunSummary",
    "listing_html",
    "outcomes_html",
    "run_head_html",
    "run_launches_html",
    "total_stages",
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
    outcomes: Funnel | None = None
    """The run's funnel from the ledger (outcomes written by ``follow`` and
    the webhooks), the numbers ``campaignkit runs`` shows."""
    stall: Stall | None = None
    hand_over: str | None = None
    """The command that hands a stalled run's planned chunks over again."""
    sent: Mapping[str, datetime] = attrs.field(factory=dict)
    """When each of its launches was sent, as the ledger says."""
    paused: RunPause | None = None
    """Why the run is paused (a guard, or a person), if it is."""
    resume: str | None = None
    """The command that resumes a paused run."""

    @property
    def recipients(self) -> int:
        """Its recipients (valid, unique inputs): every share's base."""
        return build_funnel(self.counts, ()).planned

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


def total_stages(launches: Sequence[LaunchStages]) -> LaunchStages:
    """The stages of several launches added up."""
    failures: dict[str, int] = {}
    for one in launches:
        for reason, count in one.failures:
            failures[reason] = failures.get(reason, 0) + count
    return LaunchStages(
        sum(f.waiting for f in launches),
        sum(f.sent for f in launches),
        sum(f.delivered for f in launches),
        sum(f.unknown for f in launches),
        tuple(sorted(failures.items(), key=lambda item: (-item[1], item[0]))),
    )


def _link(launch_request_id: str, link: bool = True) -> str:
    """The launch's id, a link to its page (``link``; not in a report file)."""
    code = f"<code>{escape(launch_request_id)}</code>"
    if not link:
        return code
    return f'<a href="/launches/{escape(quote(launch_request_id, safe=""))}">{code}</a>'


def _stages(update: ProgressUpdate, told: Collection[str] = ()) -> str:
    """Every non-empty stage with its count (in words on hover: its share
    of the recipients is the funnel's), then the failures in words (but
    those ``told`` elsewhere)."""
    stages = " · ".join(
        f'<span class="stage" data-stage="{stage}" data-n="{n}" '
        f'title="{escape(stage.description)}">{stage} {n}</span>'
        for stage, n in update.stages().items()
    )
    failures = "".join(
        f"<br>{n} {escape(failure_words(name))} <code>{escape(name)}</code>"
        for name, n in update.failures
        if name not in told
    )
    return stages + failures


def _launch_row(summary: LaunchSummary, link: bool = True) -> str:
    counts = summary.stages
    stages = " · ".join(
        f'<span class="share">{stage} {count} ({share(count, counts.total)})</span>'
        for stage, count in counts.items()
        if count
    )
    return (
        f'<tr data-launch="{escape(summary.launch_request_id)}">'
        f"<td>{_link(summary.launch_request_id, link)}<br>"
        f"{poll_label(summary.poll_id, summary.poll_name)}</td>"
        f"<td>{sent_html(summary)}</td><td>{state_html(summary)}</td>"
        f"<td>{counts.total}</td><td>{stack_bar(counts)}<br><small>{stages}</small></td></tr>"
    )


def _row(launch: LaunchSummary | str, link: bool = True, sent: datetime | None = None) -> str:
    """A followed launch's row, or a link to follow one (``sent``: when)."""
    if isinstance(launch, LaunchSummary):
        return _launch_row(launch, link)
    when = sent_html(LaunchSummary(launch, None, LaunchStages(), sent=sent))
    return (
        f'<tr data-launch="{escape(launch)}"><td>{_link(launch)}</td><td>{when}</td>'
        '<td colspan="3" class="none">not followed: open it to follow it</td></tr>'
    )


def run_head_html(run: RunSummary) -> str:
    """A run's poll, start, recipients, shares and funnel: the top of its row
    on the dashboard, and of its report."""
    followed = [launch for launch in run.launches if isinstance(launch, LaunchSummary)]
    delivery = total_stages([launch.stages for launch in followed])
    # No share here: the funnel gives the run's, of its recipients.
    delivered = (
        f"<p>delivery of the {len(followed)} launch(es) followed: {stack_bar(delivery)} "
        f"{delivery.delivered} delivered of their {delivery.total} recipients</p>"
        if followed
        else ""
    )
    input_state = "" if run.input_done else " (input still being read)"
    outcomes = "" if run.outcomes is None else outcomes_html(run.outcomes)
    told = () if run.outcomes is None else run.outcomes.failed  # in the funnel
    return (
        f"<h2>Run <code>{escape(run.run)}</code>: {poll_label(run.poll_id, run.poll_name)}</h2>"
        f"{_stalled(run)}{_paused(run)}"
        f"<p>started {moment(run.created)} · {run.recipients} recipients{input_state}<br>"
        f"{_stages(run.update, told)}</p>{outcomes}{delivered}"
    )


def _stalled(run: RunSummary) -> str:
    """What a stalled run says: since when, and the command that recovers it."""
    if run.stall is None:
        return ""
    command = f"<pre><code>{escape(run.hand_over)}</code></pre>" if run.hand_over else ""
    return (
        f'<div class="stalled" data-stalled-since="{run.stall.since}"><p><b>stalled</b>: '
        f"{run.stall.planned} planned recipients no worker has claimed since "
        f"{moment(datetime.fromtimestamp(run.stall.since, UTC))} (a broker that lost its "
        "messages, or no worker running). Hand them over again (nobody is sent twice) with "
        f"the input and broker of its first submit:</p>{command}</div>"
    )


def _paused(run: RunSummary) -> str:
    """What a paused run says: who paused it, when, its figures, and the
    command that resumes it."""
    pause = run.paused
    if pause is None:
        return ""
    command = f"<pre><code>{escape(run.resume)}</code></pre>" if run.resume else ""
    return (
        f'<div class="paused" data-paused-by="{escape(pause.reason)}"><p><b>paused</b> by the '
        f"{escape(pause.reason)} at {moment(datetime.fromtimestamp(pause.paused_at, UTC))}: "
        f"{escape(pause.detail)}. Nothing more of it is sent until it is resumed:</p>"
        f"{command}</div>"
    )


def run_launches_html(run: RunSummary, *, links: bool = True) -> str:
    """The run's launches, folded when many; ``links`` to their pages."""
    inside = "".join(
        _row(launch, links, None if isinstance(launch, LaunchSummary) else run.sent.get(launch))
        for launch in run.launches
    )
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


def outcomes_html(funnel: Funnel) -> str:
    """The run's funnel as the ledger has it: each step with its share of the
    recipients (those the outcomes tell "not followed" while nobody followed
    the run), then the opt-outs and the failures by status."""
    if not funnel.planned:
        return ""
    steps = " → ".join(
        f'<span class="step" data-step="{name}" data-n="{n}">{name} {n} '
        f"({share(n, funnel.planned)})</span>"
        if funnel.known(name)
        else f'<span class="step" data-step="{name}" data-n="" title="{_NOT_FOLLOWED}">'
        f"{name}: not followed</span>"
        for name, n in funnel.steps
    )
    failed = "".join(
        f"<br>{n} {escape(failure_words(status))} <code>{escape(status)}</code>"
        for status, n in sorted(funnel.failed.items(), key=lambda item: (-item[1], item[0]))
    )
    opted = f" · opted out {funnel.opted_out}" if funnel.opted_out else ""
    return f'<p class="funnel">funnel: {steps}{opted}{failed}</p>'


_NOT_FOLLOWED = (
    "nobody followed this run: campaignkit runs RUN --journal JOURNAL --follow (or a webhook "
    "app with ledger=) writes what became of each recipient"
)

_HEADER = (
    "<tr><th>launch, poll</th><th>sent at</th><th>state</th><th>deployments</th>"
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
