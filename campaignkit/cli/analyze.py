"""``analyze``: a poll's funnel and answers from the service's sessions and
histories, as tables, as JSON, or as an HTML report."""

from __future__ import annotations

from pathlib import Path

from .._words import counted
from ..analysis import (
    DEFAULT_CONCURRENCY,
    AnalysisProgress,
    PollAnalysis,
    analyze_poll,
    option_label,
    question_label,
    write_analysis_report,
)
from ..client import CampaignClient
from ..progress import percent
from .argtypes import add_session_range, positive_int
from .context import AddCommand, Ctx, ExitStatus, UsageError
from .output import ProgressDisplay, table


def register(add: AddCommand) -> None:
    p = add(
        "analyze",
        "a poll's funnel and answers by question, from the service's sessions and histories",
        "Read every session of POLL_ID created between --since and --until (without them "
        "the service answers the first 1000 of the current year) and each one's history: "
        "the funnel sessions → delivered → read → replied and the answers by question and "
        "option (answers that differ only in case or spacing are one option). Works for "
        "campaigns sent by any tool. -o writes the HTML report.",
    )
    p.add_argument("poll_id")
    add_session_range(p, "sessions a page, 1..10000 (service: 1000)")
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=DEFAULT_CONCURRENCY,
        help=f"histories read at once ({DEFAULT_CONCURRENCY})",
    )
    p.add_argument("-o", "--output", type=Path, help="also write the HTML report to this file")
    p.set_defaults(func=cmd_analyze, needs_client=True)


async def cmd_analyze(ctx: Ctx, client: CampaignClient) -> ExitStatus:
    a = ctx.args
    if a.page_size is not None and not 1 <= a.page_size <= 10000:
        raise UsageError("--page-size must be between 1 and 10000")
    if a.since is not None and a.until is not None and a.until < a.since:
        raise UsageError("--until is before --since")
    with ProgressDisplay(ctx.err, "histories", enabled=not a.quiet) as progress:

        def show(update: AnalysisProgress) -> None:
            progress.update(update.analysed, update.total, "read")

        analysis = await analyze_poll(
            client,
            a.poll_id,
            since=a.since,
            until=a.until,
            concurrency=a.concurrency,
            page_size=a.page_size,
            on_progress=show,
        )
    poll_name = None
    if a.output is not None or not ctx.json:
        names = {str(poll.id): poll.name for poll in await client.list_polls()}
        poll_name = names.get(str(a.poll_id))
    if a.output is not None:
        await write_analysis_report(analysis, a.output, poll_name=poll_name)
        ctx.note(f"report written to {a.output}")
    if ctx.json:
        ctx.emit(analysis.to_json())
    else:
        ctx.print(analysis_text(analysis, poll_name))
    return ExitStatus.OK


def analysis_text(analysis: PollAnalysis, poll_name: str | None) -> str:
    """The funnel, then each question's options, as tables; every share names its base."""
    sessions = analysis.sessions
    title = f"{poll_name} (poll {analysis.poll_id})" if poll_name else f"poll {analysis.poll_id}"
    funnel = table(
        [(step, n, percent(n, sessions)) for step, n in analysis.steps],
        ["funnel", "sessions", "of sessions"],
    )
    parts = [title, funnel]
    for question in analysis.questions:
        parts.append(
            f"{question_label(question.question)}\n"
            f"{counted(question.answers, 'answer')} from {counted(question.sessions, 'session')} "
            f"({percent(question.sessions, sessions)} of sessions)"
        )
        parts.append(
            table(
                [
                    (option_label(o.option), o.answers, percent(o.answers, question.answers))
                    for o in question.options
                ],
                ["option", "answers", "of answers"],
            )
        )
    if not analysis.questions:
        parts.append("no answers")
    return "\n\n".join(parts)
