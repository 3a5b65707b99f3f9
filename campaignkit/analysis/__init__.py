"""The funnel and the answers of any poll, from the service's own sessions
and histories (campaigns not sent through campaignkit too), in figures, as
JSON and as an HTML report like a campaign's.

- ``_analyze``: :func:`analyze_poll` and its result, :class:`PollAnalysis`;
  :func:`normalise_answer`, the one rule of which answers are one option.
- ``_report``: the HTML report, drawn with the dashboard's pieces.
"""

from ._analyze import (
    DEFAULT_CONCURRENCY,
    AnalysisProgress,
    AnswerOption,
    FunnelPoint,
    PollAnalysis,
    QuestionAnswers,
    analyze_poll,
    normalise_answer,
)
from ._report import option_label, question_label, render_analysis_report, write_analysis_report

__all__ = [
    "DEFAULT_CONCURRENCY",
    "AnalysisProgress",
    "AnswerOption",
    "FunnelPoint",
    "PollAnalysis",
    "QuestionAnswers",
    "analyze_poll",
    "normalise_answer",
    "option_label",
    "question_label",
    "render_analysis_report",
    "write_analysis_report",
]
