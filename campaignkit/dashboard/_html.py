"""HTML fragments shared by the live page and the report. Every text that
comes from outside (launch ids, poll names, status values, errors, phones)
is escaped here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from importlib import resources

import attrs

from .._deprecated import renamed_attribute
from .._redaction import redact
from ..progress import failure_words, percent
from ..status import DONE_MEANS, CampaignState
from ._stages import STAGES, LaunchStages, Stage
from ._svg import chart_svg
from ._timeline import Sample

PHONES_INLINE = 5
"""Phones shown beside a failure reason; the others fold away."""

__all__ = [
    "LaunchSummary",
    "asset",
    "bars_html",
    "document",
    "failures_html",
    "launch_body",
    "launch_parts",
    "legend_html",
    "moment",
    "percent",
    "poll_label",
    "sent_html",
    "share",
    "stack_bar",
    "stage_parts",
    "stage_sections",
    "stages_html",
    "state_html",
    "state_of",
    "summary_html",
]


def asset(name: str) -> str:
    """A static file of the package (``dashboard.css``, ``dashboard.js``)."""
    return (resources.files(__package__) / "static" / name).read_text(encoding="utf-8")


RECIPIENTS = "recipients"
"""The base of every stage's share, on every screen: a launch's deployments
are its recipients, a run's are its valid, unique inputs."""


@attrs.frozen
class LaunchSummary:
    """What a page says about one launch: ``sent`` is when its request was
    sent, where the ledger of its bulk run says (None: no ledger known
    here sent it); ``phones`` the phones behind each failure reason (the
    first few)."""

    launch_request_id: str
    state: CampaignState | None
    stages: LaunchStages
    error: str | None = None
    poll_id: int | None = None
    poll_name: str | None = None
    sent: datetime | None = None
    phones: tuple[tuple[str, tuple[str, ...]], ...] = ()

    funnel = renamed_attribute("LaunchSummary", "funnel", "stages")


def moment(at: datetime | None) -> str:
    """``2026-01-01 12:00:00 UTC`` (``-`` for None): how every page writes a time."""
    return "-" if at is None else f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def sent_html(summary: LaunchSummary) -> str:
    """When the launch was sent, or why that is not known."""
    if summary.sent is not None:
        return f'<time class="sent">{moment(summary.sent)}</time>'
    return '<span class="none" title="no run of this ledger sent it">not known</span>'


def share(count: int, total: int, base: str = RECIPIENTS) -> str:
    """``87% of recipients``: a share that names its base."""
    return f"{percent(count, total)} of {base}"


def poll_label(poll_id: int | None, name: str | None) -> str:
    """``Welcome survey (poll 12)``, escaped."""
    if poll_id is None:
        return "poll not read yet"
    return f"{escape(name)} (poll {poll_id})" if name else f"poll {poll_id}"


def legend_html() -> str:
    """What each colour and stage means."""
    items = "".join(
        f'<li><i class="swatch st-{stage}"></i><b>{stage}</b>: {escape(stage.description)}</li>'
        for stage in STAGES
    )
    return f'<ul class="legend">{items}<li>{escape(DONE_MEANS)}</li></ul>'


def stages_html(stages: LaunchStages, recipients: int | None = None) -> str:
    """One row per stage: count, share of the ``recipients`` (the launch's
    deployments unless given: a run's, of which its launches hold the
    accepted) and bar."""
    rows = [(stage, stage, count) for stage, count in stages.items()]
    return bars_html(rows, stages.total if recipients is None else recipients)


def bars_html(
    rows: Sequence[tuple[str, Stage, int]],
    total: int,
    *,
    key: str = "stage",
    base: str = RECIPIENTS,
) -> str:
    """One row per ``(label, stage, count)``: the label, a bar in the stage's
    colour, the count (its label in a ``data-{key}`` attribute) and its
    share of the ``total`` (``base`` names what it counts)."""
    items = "".join(
        f'<li class="stage"><span class="name"><i class="swatch st-{stage}"></i>{escape(label)}'
        f'</span><span class="bar"><i class="st-{stage}" style="width:{percent(count, total)}">'
        "</i></span>"
        f'<span class="count" data-{key}="{escape(label)}">{count}</span>'
        f'<span class="share">{share(count, total, base)}</span></li>'
        for label, stage, count in rows
    )
    return f'<ol class="funnel" data-total="{total}">{items}</ol>'


def failures_html(stages: LaunchStages, phones: Sequence[tuple[str, Sequence[str]]] = ()) -> str:
    """The failures by reason, in words, each with the phones behind it."""
    if not stages.failures:
        return '<p class="none">No failures.</p>'
    listed = dict(phones)
    rows = "".join(
        _failure_html(reason, count, stages.failed, listed.get(reason, ()))
        for reason, count in stages.failures
    )
    return (
        '<table class="failures"><tr><th>reason</th><th>deployments</th><th>phones</th></tr>'
        f"{rows}</table>"
    )


def _failure_html(reason: str, count: int, failed: int, phones: Sequence[str]) -> str:
    first, rest = phones[:PHONES_INLINE], phones[PHONES_INLINE:]
    unlisted = count - len(phones)
    shown = ", ".join(escape(phone) for phone in first)
    if rest:
        more = ", ".join(escape(phone) for phone in rest)
        shown += f"<details><summary>{count - len(first)} more</summary>{more}"
        shown += f" and {unlisted} more</details>" if unlisted else "</details>"
    return (
        f'<tr data-failure="{escape(reason)}"><td>{escape(failure_words(reason))} '
        f'<code>{escape(reason)}</code></td><td><span class="count" data-reason="{escape(reason)}">'
        f'{count}</span> <span class="share">{share(count, failed, "failed")}</span></td>'
        f'<td class="phones">{shown}</td></tr>'
    )


def stack_bar(stages: LaunchStages) -> str:
    """The stages as one bar, each part titled with its count and share."""
    total = stages.total
    return (
        '<span class="stack">'
        + "".join(
            f'<i class="st-{stage}" style="width:{percent(count, total)}" '
            f'title="{stage} {count} ({share(count, total)})"></i>'
            for stage, count in stages.items()
            if count
        )
        + "</span>"
    )


def state_of(summary: LaunchSummary) -> str:
    """The request's state (``DONE``...), or why it is not known."""
    if summary.error is not None:
        return "error"
    return "not read yet" if summary.state is None else summary.state.value


def state_html(summary: LaunchSummary) -> str:
    """The request's state in words (``DONE`` alone would read as "everyone
    done"), its code kept in a ``data-state`` attribute."""
    state = summary.state
    words = state_of(summary) if state is None else f"request {state.description}"
    return f'<span class="state" data-state="{state_of(summary)}">{escape(words)}</span>'


def summary_html(summary: LaunchSummary) -> str:
    """Poll, times, state, progress, and the last error if the watch stopped on one."""
    stages = summary.stages
    done = stages.done
    error = f'<p class="error">{escape(summary.error)}</p>' if summary.error is not None else ""
    return (
        f'<dl class="summary"><dt>poll</dt><dd>{poll_label(summary.poll_id, summary.poll_name)}'
        f"</dd><dt>launch</dt><dd><code>{escape(summary.launch_request_id)}</code></dd>"
        f"<dt>sent at</dt><dd>{sent_html(summary)}</dd>"
        f"<dt>state</dt><dd>{state_html(summary)}</dd>"
        f'<dt title="{escape(DONE_MEANS)}">settled</dt>'
        f"<dd>{done} ({share(done, stages.total)})</dd>"
        f"<dt>delivered</dt><dd>{stages.delivered} ({share(stages.delivered, stages.total)})"
        f"</dd><dt>failed</dt><dd>{stages.failed} ({share(stages.failed, stages.total)})</dd>"
        f"</dl>{error}"
    )


def document(title: str, body: str, *, head: str) -> str:
    """A whole HTML page (a live one or the report), API keys redacted;
    ``head`` brings the style (a link or inline)."""
    return redact(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>{head}</head><body>{body}</body></html>"
    )


def stage_parts(
    stages: LaunchStages,
    samples: Sequence[Sample],
    phones: Sequence[tuple[str, Sequence[str]]] = (),
    recipients: int | None = None,
) -> dict[str, str]:
    """The stages (shares of ``recipients``: see :func:`stages_html`), the
    chart and the failures (with their ``phones``) by element id (the
    stages' is ``funnel``, the page's delivery funnel)."""
    return {
        "funnel": stages_html(stages, recipients),
        "chart": chart_svg(samples),
        "failures": failures_html(stages, phones),
    }


def stage_sections(parts: Mapping[str, str]) -> str:
    """The sections of :func:`stage_parts`: the stages with their legend,
    the chart, the failures (of a launch's page, or of a run's report)."""
    return (
        f'<section><h2>Delivery funnel</h2>{legend_html()}<div id="funnel">{parts["funnel"]}'
        "</div></section>"
        f'<section><h2>Status over time</h2><div id="chart">{parts["chart"]}</div></section>'
        f'<section><h2>Failures by reason</h2><div id="failures">{parts["failures"]}</div>'
        "</section>"
    )


def launch_parts(summary: LaunchSummary, samples: Sequence[Sample]) -> dict[str, str]:
    """The fragments of a launch page by element id: what a live update replaces."""
    return {
        "summary": summary_html(summary),
        **stage_parts(summary.stages, samples, summary.phones),
    }


def launch_body(
    summary: LaunchSummary, samples: Sequence[Sample], *, events: str | None = None, note: str = ""
) -> str:
    """A launch's page body; ``events`` is the URL of its live updates."""
    parts = launch_parts(summary, samples)
    live = f' data-events="{escape(events)}"' if events is not None else ""
    title = escape(summary.poll_name) if summary.poll_name else "Campaign"
    return (
        f'<main class="launch"{live}><h1>{title} <code>{escape(summary.launch_request_id)}'
        f"</code></h1>{note}"
        f'<section id="summary">{parts["summary"]}</section>{stage_sections(parts)}</main>'
    )
