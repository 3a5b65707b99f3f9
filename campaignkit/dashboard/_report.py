"""The campaign report: the dashboard's funnel and chart as one self-contained
HTML file (inline style and SVG, no script, no external URL), to attach to an
email."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..models import CampaignStatus
from ._funnel import funnel
from ._html import LaunchSummary, asset, document, launch_body
from ._timeline import Sample

if TYPE_CHECKING:
    from ..client import CampaignClient

__all__ = ["render_report", "write_report"]


def render_report(
    status: CampaignStatus, history: Sequence[Sample] = (), *, now: datetime | None = None
) -> str:
    """The report of ``status``; ``history`` (a dashboard's samples of this
    launch, time order) draws the chart, which ends with ``status`` as read
    at ``now`` (default: now)."""
    now = now or datetime.now(UTC)
    summary = LaunchSummary(
        status.launch_request_id,
        status.status,
        funnel(Counter(deployment.status for deployment in status.deployments)),
    )
    samples = list(history)
    if not samples or (samples[-1].state, samples[-1].funnel) != (summary.state, summary.funnel):
        samples.append(Sample(now, summary.state, summary.funnel))
    note = (
        f'<p class="note">Poll {status.poll_id} · report of '
        f"{now.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC · campaignkit</p>"
    )
    return document(
        f"Campaign report {status.launch_request_id}",
        launch_body(summary, samples, note=note),
        head=f"<style>{asset('dashboard.css')}</style>",
    )


async def write_report(
    client: CampaignClient,
    launch_request_id: str,
    path: str | os.PathLike[str],
    *,
    history: Sequence[Sample] = (),
) -> CampaignStatus:
    """Read the launch's status and write its report to ``path``; returns the
    status read (for a summary line)."""
    status = await client.get_campaign_status(launch_request_id)
    text = render_report(status, history)
    await asyncio.to_thread(_write, path, text)
    return status


def _write(path: str | os.PathLike[str], text: str) -> None:
    with open(path, "w", encoding="utf-8") as file:
        file.write(text)
