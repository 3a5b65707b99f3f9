"""The analysis report: one self-contained HTML file drawn with the
dashboard's pieces, its numbers read back by parsing it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from campaignkit import CampaignClient
from campaignkit.analysis import (
    AnswerOption,
    FunnelPoint,
    PollAnalysis,
    QuestionAnswers,
    analyze_poll,
    render_analysis_report,
    write_analysis_report,
)

from .conftest import QUESTIONS, Survey

pytestmark = pytest.mark.timeout(30)


class Report(HTMLParser):
    """The numbers a report shows: the funnel's steps, each question's
    options (by its heading), the chart's layers, what it would load."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: dict[str, int] = {}
        self.questions: dict[str, dict[str, int]] = {}
        self.layers: list[str] = []
        self.loads: list[str] = []
        self._into: tuple[str, str] | None = None
        self._heading = False
        self._question = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag in {"script", "link", "img", "iframe"} or {"src", "href"} & found.keys():
            self.loads.append(tag)
        if "data-step" in found:
            self._into = ("step", found["data-step"] or "")
        elif "data-option" in found:
            self._into = ("option", found["data-option"] or "")
        self._heading = tag == "h3"
        if tag == "polygon":
            self.layers.append((found.get("class") or "").removeprefix("area st-"))

    def handle_data(self, data: str) -> None:
        if self._heading:
            self._question = data
            self.questions[data] = {}
        elif self._into is not None:
            kind, label = self._into
            if kind == "step":
                self.steps[label] = int(data)
            else:
                self.questions[self._question][label] = int(data)
        self._into = None
        self._heading = False


def read(page: str) -> Report:
    report = Report()
    report.feed(page)
    return report


async def test_the_report_shows_the_survey(
    client: CampaignClient, survey: Survey, tmp_path: Path
) -> None:
    analysis = await analyze_poll(client, survey.poll_id, since=survey.sent_after)
    path = tmp_path / "report.html"
    await write_analysis_report(analysis, path, poll_name="Plan survey")
    page = path.read_text(encoding="utf-8")
    report = read(page)
    assert report.steps == {"sessions": 5, "delivered": 5, "read": 3, "replied": 3}
    assert report.questions == {QUESTIONS[0]: {"yes": 2, "maybe": 1}, QUESTIONS[1]: {"no": 2}}
    # Each message was sent before it was delivered; nobody read without replying.
    assert report.layers == ["replied", "delivered", "sent"]
    assert report.loads == []
    assert "<title>Poll report Plan survey</title>" in page
    assert "(60% of sessions)" in page  # the first question's 3 sessions of 5


def test_what_it_shows_is_escaped() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    analysis = PollAnalysis(
        "<i>7</i>",
        start,
        start + timedelta(days=1),
        2,
        2,
        1,
        1,
        (
            QuestionAnswers(
                "<script>alert(1)</script>?",
                2,
                1,
                (
                    AnswerOption("<b>yes</b>", 1, (("<B>yes</B>", 1),)),
                    AnswerOption("", 1, (("", 1),)),
                ),
            ),
            QuestionAnswers(None, 1, 1, (AnswerOption("hi", 1, (("hi", 1),)),)),
        ),
        (FunnelPoint(start, 2, 0, 0, 0), FunnelPoint(start + timedelta(seconds=30), 2, 2, 1, 1)),
    )
    page = render_analysis_report(analysis, poll_name="<u>poll</u>", now=start)
    report = read(page)
    assert report.loads == []
    for raw in ("<script>", "<b>", "<B>", "<i>7", "<u>"):
        assert raw not in page
    assert report.questions == {
        "<script>alert(1)</script>?": {"<b>yes</b>": 1, "(no text)": 1},
        "(the user wrote first)": {"hi": 1},
    }
    assert report.layers == ["replied", "delivered", "sent"]
    assert "<dd>2026-01-01 00:00:00 UTC</dd><dt>until</dt><dd>2026-01-02 00:00:00 UTC</dd>" in page


def test_no_sessions_says_no_answers() -> None:
    page = render_analysis_report(PollAnalysis("7", None, None, 0, 0, 0, 0, ()))
    report = read(page)
    assert report.steps == {"sessions": 0, "delivered": 0, "read": 0, "replied": 0}
    assert report.layers == []
    assert "No answers." in page
    assert "the service's default" in page


def test_every_share_names_its_own_base() -> None:
    """Issue 32: the funnel's shares are of the sessions and each question's
    of its answers; the bars said "of recipients" for both."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    options = (AnswerOption("yes", 3, (("yes", 3),)), AnswerOption("no", 1, (("no", 1),)))
    analysis = PollAnalysis(
        "7", start, None, 8, 6, 4, 4, (QuestionAnswers("ok?", 4, 4, options),), ()
    )
    page = render_analysis_report(analysis, now=start)
    assert "recipients" not in page
    funnel = page[page.index('<div id="funnel">') : page.index('<div id="chart">')]
    assert '<span class="share">75% of sessions</span>' in funnel  # 6 delivered of 8
    answers = page[page.index('<div id="answers">') :]
    assert '<span class="share">75% of answers</span>' in answers  # 3 yes of 4
    assert "of sessions</span>" not in answers
