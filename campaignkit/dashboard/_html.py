"""HTML fragments shared by the live page and the report. Every text that
comes from outside (launch ids, status values, errors) is escaped here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from importlib import resources
from urllib.parse import quote

import attrs

from .._redaction import redact
from ..status import CampaignState
from ._funnel import Funnel
from ._svg import chart_svg
from ._timeline import Sample

__all__ = [
    "LaunchSummary",
    "asset",
    "document",
    "funnel_html",
    "launch_body",
    "launch_parts",
    "launches_html",
    "summary_html",
]


def asset(name: str) -> str:
    """A static file of the package (``dashboard.css``, ``dashboard.js``)."""
    return (resources.files(__package__) / "static" / name).read_text(encoding="utf-8")


@attrs.frozen
class LaunchSummary:
    """What a page says about one launch."""

    launch_request_id: str
    state: CampaignState | None
    funnel: Funnel
    error: str | None = None


def _percent(count: int, total: int) -> str:
    return f"{100 * count / total:.2f}%" if total else "0%"


def funnel_html(funnel: Funnel) -> str:
    """One row per stage (count and bar), then the failures by reason."""
    total = funnel.total
    rows = "".join(
        f'<li class="stage"><span class="name"><i class="swatch st-{stage}"></i>{stage}</span>'
        f'<span class="bar"><i class="st-{stage}" style="width:{_percent(count, total)}">'
        "</i></span>"
        f'<span class="count" data-stage="{stage}">{count}</span></li>'
        for stage, count in funnel.stages()
    )
    failures = "".join(
        f'<li><span>{escape(reason)}</span><span class="count" data-reason="{escape(reason)}">'
        f"{count}</span></li>"
        for reason, count in funnel.failures
    )
    table = (
        f'<h3>Failures by reason</h3><ul class="failures">{failures}</ul>'
        if failures
        else '<p class="failures none">No failures.</p>'
    )
    return f'<ol class="funnel" data-total="{total}">{rows}</ol>{table}'


def _stack_bar(funnel: Funnel) -> str:
    total = funnel.total
    return (
        '<span class="stack">'
        + "".join(
            f'<i class="st-{stage}" style="width:{_percent(count, total)}" '
            f'title="{stage} {count}"></i>'
            for stage, count in funnel.stages()
            if count
        )
        + "</span>"
    )


def _state(summary: LaunchSummary) -> str:
    if summary.error is not None:
        return "error"
    return "waiting" if summary.state is None else summary.state.value


def summary_html(summary: LaunchSummary) -> str:
    """The state, the progress, and the last error if the watch stopped on one."""
    funnel = summary.funnel
    done = funnel.total - funnel.queued - funnel.taken
    error = f'<p class="error">{escape(summary.error)}</p>' if summary.error is not None else ""
    return (
        f'<dl class="summary"><dt>launch</dt><dd><code>{escape(summary.launch_request_id)}'
        f'</code></dd><dt>state</dt><dd class="state" data-state="{_state(summary)}">'
        f"{_state(summary)}</dd><dt>done</dt><dd>{done} of {funnel.total}</dd>"
        f"<dt>delivered</dt><dd>{funnel.delivered}</dd><dt>failed</dt><dd>{funnel.failed}</dd>"
        f"</dl>{error}"
    )


def launches_html(summaries: Iterable[LaunchSummary]) -> str:
    """The list of launches, most recent first as given, each linking to its page."""
    rows = "".join(
        f'<tr data-launch="{escape(s.launch_request_id)}"><td><a href="/launches/'
        f'{escape(quote(s.launch_request_id, safe=""))}"><code>{escape(s.launch_request_id)}'
        f"</code></a></td><td>{_state(s)}</td><td>{s.funnel.total}</td>"
        f"<td>{_stack_bar(s.funnel)}</td></tr>"
        for s in summaries
    )
    if not rows:
        return '<p class="none">No launch yet: send a campaign, or open /launches/ID.</p>'
    return (
        '<table class="launches"><tr><th>launch</th><th>state</th><th>deployments</th>'
        f"<th>stages</th></tr>{rows}</table>"
    )


def document(title: str, body: str, *, head: str) -> str:
    """A whole HTML page (a live one or the report), API keys redacted;
    ``head`` brings the style (a link or inline)."""
    return redact(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>{head}</head><body>{body}</body></html>"
    )


def launch_parts(summary: LaunchSummary, samples: Sequence[Sample]) -> dict[str, str]:
    """The fragments of a launch page by element id: what a live update replaces."""
    return {
        "summary": summary_html(summary),
        "funnel": funnel_html(summary.funnel),
        "chart": chart_svg(samples),
    }


def launch_body(
    summary: LaunchSummary, samples: Sequence[Sample], *, events: str | None = None, note: str = ""
) -> str:
    """A launch's page body; ``events`` is the URL of its live updates."""
    parts = launch_parts(summary, samples)
    live = f' data-events="{escape(events)}"' if events is not None else ""
    return (
        f'<main class="launch"{live}><h1>Campaign <code>{escape(summary.launch_request_id)}'
        f"</code></h1>{note}"
        f'<section id="summary">{parts["summary"]}</section>'
        f'<section><h2>Delivery funnel</h2><div id="funnel">{parts["funnel"]}</div></section>'
        f'<section><h2>Status over time</h2><div id="chart">{parts["chart"]}</div></section>'
        "</main>"
    )
