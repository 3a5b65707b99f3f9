"""The campaign report: the dashboard's funnel and chart as one self-contained
HTML file (inline style and SVG, no script, no external URL), to attach to an
email. Its chart covers the launch's life: the samples of whoever watched it
(the dashboard, or :func:`follow_report` until it settles), from the start of
its bulk run when a ledger knows it."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .. import errors
from .._funnel import Funnel
from ..ledger import ACCEPTED, RecipientOutcome, RunInfo
from ..models import CampaignStatus
from ..status import CampaignState, DeploymentStatus
from ._html import LaunchSummary, asset, document, launch_body, moment
from ._listing import outcomes_html
from ._runs import run_launches, sent_times
from ._stages import LaunchStages, failed_phones, launch_stages
from ._timeline import Sample, Timeline

if TYPE_CHECKING:
    from ..client import CampaignClient
    from ..ledger import Ledger

__all__ = [
    "follow_report",
    "history_of",
    "launch_sent",
    "ledger_history",
    "render_report",
    "run_of",
    "run_start",
    "write_file",
    "write_report",
]


def render_report(
    status: CampaignStatus,
    history: Sequence[Sample] = (),
    *,
    now: datetime | None = None,
    poll_name: str | None = None,
    sent: datetime | None = None,
    run_funnel: Funnel | None = None,
) -> str:
    """The report of ``status``; ``history`` (samples of this launch, time
    order) draws the chart, which ends with ``status`` as read at ``now``
    (default: now) and begins at ``sent`` (when the launch was sent, if
    known: :func:`launch_sent`; every deployment still waiting then).
    ``run_funnel``: the funnel of its bulk run, from the ledger, shown
    under the title."""
    now = now or datetime.now(UTC)
    counts = Counter(deployment.status for deployment in status.deployments)
    samples = list(history)
    if sent is not None and sent < (samples[0].at if samples else now):
        start = Sample(sent, CampaignState.PENDING, LaunchStages(waiting=len(status.deployments)))
        samples.insert(0, start)
    summary = LaunchSummary(
        status.launch_request_id,
        status.status,
        launch_stages(counts),
        poll_id=status.poll_id,
        poll_name=poll_name,
        sent=sent,
        phones=failed_phones((d.cellphone, d.status) for d in status.deployments),
    )
    if not samples or samples[-1].at < now:  # the chart runs up to the reading
        samples.append(Sample(now, summary.state, summary.stages))
    note = f'<p class="note">Report of {moment(now)} · campaignkit</p>'
    if run_funnel is not None:
        note += outcomes_html(run_funnel)
    return document(
        f"Campaign report {poll_name or status.poll_id} {status.launch_request_id}",
        launch_body(summary, samples, note=note),
        head=f"<style>{asset('dashboard.css')}</style>",
    )


async def run_of(ledger: Ledger, launch_request_id: str) -> RunInfo | None:
    """The bulk run that sent the launch, if the ledger has it."""
    for info in await ledger.runs():
        async for record in ledger.records(info.run, [ACCEPTED]):
            if record.launch_request_id == launch_request_id:
                return info
    return None


async def run_start(ledger: Ledger, launch_request_id: str) -> datetime | None:
    """When the bulk run that sent the launch started, if the ledger has it."""
    info = await run_of(ledger, launch_request_id)
    return None if info is None else datetime.fromtimestamp(info.created, UTC)


async def launch_sent(ledger: Ledger, launch_request_id: str) -> datetime | None:
    """When the launch was sent, if a run of the ledger sent it."""
    info = await run_of(ledger, launch_request_id)
    if info is None:
        return None
    return (await sent_times(ledger, info.run, [launch_request_id])).get(launch_request_id)


async def ledger_history(
    ledger: Ledger, run: str, launch_request_id: str | None = None
) -> list[Sample]:
    """The run (or only its launch ``launch_request_id``) as its ledger saw
    it move: a sample at each time a recipient's last status was first seen
    (those not seen yet still waiting), for the chart of a report made after
    the run was followed."""
    launches = await run_launches(ledger, run) if launch_request_id is None else [launch_request_id]
    phones = await ledger.launch_phones(run, launches)
    return history_of(await ledger.outcomes(run), phones)


def history_of(
    outcomes: Iterable[RecipientOutcome], phones: Mapping[str, Sequence[str]]
) -> list[Sample]:
    """The samples of :func:`ledger_history` from the run's outcomes, of the
    launches that ``phones`` holds (their accepted recipients, by launch)."""
    counts: Counter[DeploymentStatus | None] = Counter(
        {None: sum(len(listed) for listed in phones.values())}
    )
    seen = sorted(
        (outcome.status_at, outcome.status)
        for outcome in outcomes
        if outcome.launch_request_id in phones
        and outcome.status is not None
        and outcome.status_at is not None
    )
    samples = []
    for at, moved in itertools.groupby(seen, key=lambda item: item[0]):
        for _, status in moved:
            counts[None] -= 1
            counts[status] += 1
        samples.append(Sample(at, None, launch_stages(counts)))
    return samples


async def follow_report(
    client: CampaignClient,
    launch_request_id: str,
    *,
    poll_interval: float = 1.0,
    max_interval: float = 10.0,
    timeout: float | None = None,
) -> tuple[CampaignStatus, list[Sample]]:
    """Track the launch until it settles (or ``timeout`` seconds pass),
    sampling it at every poll that moves it; its last status and the samples
    (for :func:`render_report`)."""
    timeline = Timeline()
    tracker = client.track(
        launch_request_id,
        until="settled",
        poll_interval=poll_interval,
        max_interval=max_interval,
        timeout=timeout,
    )

    def sample(at: datetime) -> None:
        timeline.record(Sample(at, tracker.state, launch_stages(tracker.counts)))

    observed: datetime | None = None
    with contextlib.suppress(errors.TimeoutError):  # what was seen is reported
        async with tracker:
            async for change in tracker:
                if change.observed_at != observed:
                    observed = change.observed_at
                    sample(observed)
    sample(datetime.now(UTC))
    status = tracker.result
    if status is None:  # it timed out before its first reading
        status = await client.get_campaign_status(launch_request_id)
    return status, list(timeline.samples)


async def write_report(
    client: CampaignClient,
    launch_request_id: str,
    path: str | os.PathLike[str],
    *,
    history: Sequence[Sample] = (),
    status: CampaignStatus | None = None,
    poll_name: str | None = None,
    sent: datetime | None = None,
    run_funnel: Funnel | None = None,
) -> CampaignStatus:
    """Write the launch's report to ``path`` (its status read unless given);
    returns the status (for a summary line)."""
    if status is None:
        status = await client.get_campaign_status(launch_request_id)
    text = render_report(status, history, poll_name=poll_name, sent=sent, run_funnel=run_funnel)
    await asyncio.to_thread(write_file, path, text)
    return status


def write_file(path: str | os.PathLike[str], text: str) -> None:
    """Write a report's ``text`` to ``path`` (UTF-8)."""
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)
