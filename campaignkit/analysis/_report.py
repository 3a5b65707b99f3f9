"""A poll's analysis as one self-contained HTML file, drawn with the
dashboard's pieces (its funnel bars, its stacked chart, its style) so it
reads like a campaign's report."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from html import escape

from ..dashboard import asset, bars_html, document, moment, stacked_chart_svg, write_file
from ..progress import percent
from ..status import Stage
from ._analyze import PollAnalysis, QuestionAnswers

__all__ = ["NO_QUESTION", "NO_TEXT", "render_analysis_report", "write_analysis_report"]

NO_QUESTION = "(the user wrote first)"
"""How a screen names the answers that no message of the service's side came before."""
NO_TEXT = "(no text)"
"""How a screen names an answer without text (a file, a location)."""

STEP_STAGES = {
    "sessions": Stage.SENT,
    "delivered": Stage.DELIVERED,
    "read": Stage.READ,
    "replied": Stage.REPLIED,
}
"""The colour of each funnel step."""

FUNNEL_MEANS = (
    "Shares are of the sessions. Delivered: a message of the service's side has a delivery "
    "time in the session's history; read: one has a read time; replied: the user wrote. A "
    "reply also counts as read and delivered, a read as delivered."
)


def question_label(question: str | None) -> str:
    """How a question is named on screen: its text, or that the user wrote first."""
    return NO_QUESTION if question is None else question


def option_label(option: str) -> str:
    """How an option is named on screen: its text, or that the answer had none."""
    return option or NO_TEXT


def render_analysis_report(
    analysis: PollAnalysis, *, poll_name: str | None = None, now: datetime | None = None
) -> str:
    """The report of ``analysis`` (``poll_name``: its poll's, if known), as read at ``now``."""
    now = now or datetime.now(UTC)
    sessions = analysis.sessions
    funnel = bars_html(
        [(step, STEP_STAGES[step], n) for step, n in analysis.steps],
        sessions,
        key="step",
        base="sessions",
    )
    title = escape(poll_name) if poll_name else "Poll"
    questions = "".join(_question_html(question, sessions) for question in analysis.questions)
    body = (
        f'<main class="launch analysis"><h1>{title} <code>poll {escape(analysis.poll_id)}</code>'
        f'</h1><p class="note">Report of {moment(now)} · campaignkit</p>'
        f'<section id="summary">{_summary_html(analysis, poll_name)}</section>'
        f'<section><h2>Funnel</h2><p class="note">{escape(FUNNEL_MEANS)}</p>'
        f'<div id="funnel">{funnel}</div></section>'
        f'<section><h2>Sessions over time</h2><div id="chart">{_chart(analysis)}</div></section>'
        '<section><h2>Answers by question</h2><div id="answers">'
        f"{questions or '<p class=none>No answers.</p>'}</div></section></main>"
    )
    return document(
        f"Poll report {poll_name or analysis.poll_id}",
        body,
        head=f"<style>{asset('dashboard.css')}</style>",
    )


def _summary_html(analysis: PollAnalysis, poll_name: str | None) -> str:
    name = f"{escape(poll_name)} " if poll_name else ""
    since = "the service's default" if analysis.since is None else moment(analysis.since)
    until = "the service's default" if analysis.until is None else moment(analysis.until)
    return (
        f'<dl class="summary"><dt>poll</dt><dd>{name}(poll {escape(analysis.poll_id)})</dd>'
        f"<dt>sessions since</dt><dd>{since}</dd><dt>until</dt><dd>{until}</dd>"
        f'<dt>sessions</dt><dd data-sessions="{analysis.sessions}">{analysis.sessions}</dd></dl>'
    )


def _chart(analysis: PollAnalysis) -> str:
    """The sessions by the furthest step each had reached, over time."""
    points = analysis.over_time
    return stacked_chart_svg(
        [point.at for point in points],
        [
            (Stage.REPLIED, [p.replied for p in points]),
            (Stage.READ, [p.read - p.replied for p in points]),
            (Stage.DELIVERED, [p.delivered - p.read for p in points]),
            (Stage.SENT, [p.sessions - p.delivered for p in points]),
        ],
        "sessions",
    )


def _question_html(question: QuestionAnswers, sessions: int) -> str:
    label = question_label(question.question)
    options = bars_html(
        [(option_label(o.option), Stage.REPLIED, o.answers) for o in question.options],
        question.answers,
        key="option",
        base="answers",
    )
    written = "".join(
        f"<li>{escape(option_label(option.option))}: "
        + ", ".join(f"<q>{escape(text)}</q> {n}" for text, n in option.texts)
        + "</li>"
        for option in question.options
    )
    return (
        f'<article class="question" data-answers="{question.answers}">'
        f"<h3>{escape(label)}</h3>"
        f'<p class="note">{question.answers} answers from {question.sessions} sessions '
        f"({percent(question.sessions, sessions)} of sessions); shares of the "
        f"{question.answers} answers</p>{options}"
        f"<details><summary>as written</summary><ul>{written}</ul></details></article>"
    )


async def write_analysis_report(
    analysis: PollAnalysis, path: str | os.PathLike[str], *, poll_name: str | None = None
) -> None:
    """Write the report of ``analysis`` to ``path`` (UTF-8)."""
    text = render_analysis_report(analysis, poll_name=poll_name)
    await asyncio.to_thread(write_file, path, text)
