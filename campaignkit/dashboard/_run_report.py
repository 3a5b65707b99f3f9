"""The report of a whole bulk run, read from its ledger alone: the run's row
of the dashboard (poll, start, funnel with shares), the chart of its whole
life, the failures with their phones and its launches, as one
self-contained HTML file like a launch's report."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import TYPE_CHECKING

from ..errors import LedgerError
from ..ledger import RecipientOutcome
from ..status import CampaignState, DeploymentStatus
from ._html import LaunchSummary, asset, document, moment, stage_parts, stage_sections
from ._listing import RunSummary, run_head_html, run_launches_html, total_stages
from ._report import history_of, write_file
from ._runs import poll_id, run_launches, sent_times
from ._stages import LaunchStages, failed_phones, launch_stages
from ._timeline import Sample

if TYPE_CHECKING:
    from ..ledger import Ledger

__all__ = ["read_run_report", "render_run_report", "write_run_report"]


def render_run_report(
    run: RunSummary,
    history: Sequence[Sample] = (),
    *,
    phones: Sequence[tuple[str, Sequence[str]]] = (),
    now: datetime | None = None,
) -> str:
    """The report of ``run`` (its launches as summaries, from the ledger):
    ``history`` (samples of the whole run, time order) draws the chart from
    the run's start to ``now`` (default: now); ``phones`` are the phones
    behind each failure reason."""
    now = now or datetime.now(UTC)
    delivery = total_stages([s.stages for s in run.launches if isinstance(s, LaunchSummary)])
    samples = [Sample(run.created, CampaignState.PENDING, LaunchStages(waiting=delivery.total))]
    samples += [sample for sample in history if sample.at >= run.created]
    if samples[-1].at < now:  # the chart runs up to the reading
        samples.append(Sample(now, None, samples[-1].stages))
    title = escape(run.poll_name) if run.poll_name else "Campaign"
    parts = stage_parts(delivery, samples, phones, run.recipients)
    body = (
        f'<main class="launch run-report"><h1>{title} <code>{escape(run.run)}</code></h1>'
        f'<p class="note">Report of {moment(now)} · campaignkit</p>'
        f'<section id="summary">{run_head_html(run)}</section>{stage_sections(parts)}'
        f"<section><h2>Launches</h2>{run_launches_html(run, links=False)}</section></main>"
    )
    return document(
        f"Run report {run.poll_name or run.run} {run.run}",
        body,
        head=f"<style>{asset('dashboard.css')}</style>",
    )


async def read_run_report(
    ledger: Ledger, run: str, *, poll_name: str | None = None
) -> tuple[RunSummary, list[Sample], tuple[tuple[str, tuple[str, ...]], ...]]:
    """What :func:`render_run_report` shows of ``run``, from the ledger: the
    run with its launches (their counts from the outcomes; ``DONE`` when
    followed until every deployment was final), the samples of its life, the
    phones behind each failure reason."""
    info = await ledger.run_info(run)
    if info is None:
        raise LedgerError(f"this ledger has no run {run!r}")
    phones = await ledger.launch_phones(run, await run_launches(ledger, run))
    outcomes = [o for o in await ledger.outcomes(run) if o.launch_request_id in phones]
    final = await ledger.final_launches(run)
    seen: dict[str, list[RecipientOutcome]] = {launch: [] for launch in phones}
    for outcome in outcomes:
        if outcome.launch_request_id is not None and outcome.status is not None:
            seen[outcome.launch_request_id].append(outcome)
    poll = poll_id(info.poll)
    sent = await sent_times(ledger, run, list(phones))
    launches = tuple(
        _launch(launch, len(listed), seen[launch], launch in final, (poll, poll_name), sent)
        for launch, listed in phones.items()
    )
    summary = RunSummary(
        run,
        poll,
        poll_name,
        datetime.fromtimestamp(info.created, UTC),
        await ledger.counts(run),
        info.input_done,
        launches,
        await ledger.funnel(run),
    )
    failed = failed_phones((outcome.phone, outcome.status) for outcome in outcomes)
    return summary, history_of(outcomes, phones), failed


def _launch(
    launch: str,
    recipients: int,
    seen: Sequence[RecipientOutcome],
    final: bool,
    poll: tuple[int | None, str | None],
    sent: Mapping[str, datetime],
) -> LaunchSummary:
    """A launch of the run as the outcomes ``seen`` of it (those with a
    status) tell it; ``poll``: its poll's id and name; ``sent``: when each
    launch of the run was sent."""
    counts: Counter[DeploymentStatus | None] = Counter(o.status for o in seen)
    counts[None] = recipients - len(seen)
    return LaunchSummary(
        launch,
        CampaignState.DONE if final else None,
        launch_stages(counts),
        poll_id=poll[0],
        poll_name=poll[1],
        sent=sent.get(launch),
    )


async def write_run_report(
    ledger: Ledger,
    run: str,
    path: str | os.PathLike[str],
    *,
    poll_name: str | None = None,
) -> RunSummary:
    """Write the report of the bulk run ``run`` to ``path``, from ``ledger``
    alone (``poll_name``: the name of its poll, if known); returns the run
    (for a summary line)."""
    summary, history, phones = await read_run_report(ledger, run, poll_name=poll_name)
    await asyncio.to_thread(write_file, path, render_run_report(summary, history, phones=phones))
    return summary
