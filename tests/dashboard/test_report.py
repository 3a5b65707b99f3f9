"""The report: one self-contained HTML file with the dashboard's funnel and chart."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from campaignkit import (
    CampaignClient,
    CampaignState,
    CampaignStatus,
    Deployment,
    DeploymentStatus,
    User,
)
from campaignkit.dashboard import (
    LaunchStages,
    LaunchSummary,
    Sample,
    follow_report,
    launch_stages,
    ledger_history,
    render_report,
    write_report,
    write_run_report,
)
from campaignkit.dashboard._listing import total_stages
from campaignkit.ledger import SqliteLedger
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(30)

S = DeploymentStatus
LOADS = {"script", "link", "img", "iframe", "object", "embed", "audio", "video", "source"}


class Outside(HTMLParser):
    """What in a page would load from elsewhere or run: tags and URL attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in LOADS:
            self.found.append(f"<{tag}>")
        for name, value in attrs:
            if name in {"src", "href", "xlink:href", "action", "srcset"} or name.startswith("on"):
                self.found.append(f"{tag} {name}={value}")


def outside_references(page: str) -> list[str]:
    parser = Outside()
    parser.feed(page)
    words = [word for word in ("http:", "https:", "url(", "@import", "//") if word in page]
    return parser.found + words


def deployment(i: int, status: DeploymentStatus | None) -> Deployment:
    return Deployment(f"c{i}", f"s{i}", f"300{i:07d}", status=status)


def test_a_report_is_self_contained_and_escapes_what_it_shows() -> None:
    statuses = [S.DELIVERED] * 5 + [S.SUCCESS, S.FAILURE_BY_OPTOUT_CONTACT, None]
    status = CampaignStatus(
        "<b>launch</b>", CampaignState.CLAIMED, 7, tuple(map(deployment, range(8), statuses))
    )
    start = datetime(2026, 1, 1, tzinfo=UTC)
    history = [Sample(start, CampaignState.PENDING, LaunchStages())]
    page = render_report(status, history, now=start + timedelta(seconds=90))

    assert outside_references(page) == []
    assert "<b>launch</b>" not in page
    assert "&lt;b&gt;launch&lt;/b&gt;" in page
    assert 'data-stage="delivered">5<' in page
    assert 'data-stage="waiting">1<' in page
    assert 'data-reason="FAILURE_BY_OPTOUT_CONTACT">1<' in page
    assert "<style>" in page
    assert ".st-delivered" in page
    assert "<svg" in page
    assert ">90 s</text>" in page
    assert "2026-01-01 00:01:30 UTC" in page


async def test_write_report_reads_the_launch(
    client: CampaignClient,
    send: Callable[[], Awaitable[str]],
    settle: Callable[[str], Awaitable[Counter[DeploymentStatus | None]]],
    tmp_path: Path,
) -> None:
    launch = await send()
    expected = launch_stages(await settle(launch))
    path = tmp_path / "report.html"

    status = await write_report(client, launch, path)

    page = path.read_text(encoding="utf-8")
    assert status.launch_request_id == launch
    assert launch_stages(Counter(d.status for d in status.deployments)) == expected
    assert outside_references(page) == []
    for stage, count in expected.items():
        assert f'data-stage="{stage}">{count}<' in page


def test_the_check_sees_what_loads_from_elsewhere() -> None:
    page = '<link rel="stylesheet" href="/s.css"><p style="background:url(x.png)">'
    assert outside_references(page) == ["<link>", "link href=/s.css", "url("]


def test_the_chart_starts_when_the_launch_was_sent() -> None:
    status = CampaignStatus("l", CampaignState.DONE, 7, (deployment(0, S.DELIVERED),))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    seen = [
        Sample(start + timedelta(minutes=3), CampaignState.DONE, launch_stages({S.DELIVERED: 1}))
    ]
    page = render_report(status, seen, now=start + timedelta(minutes=4), sent=start)
    unknown_start = render_report(status, seen, now=start + timedelta(minutes=4))

    assert 'aria-label="deployments by stage over 4 min"' in page
    assert 'sent at</dt><dd><time class="sent">2026-01-01 00:00:00 UTC' in page
    assert "sent at</dt><dd><span" in unknown_start  # not known, and said so
    assert 'aria-label="deployments by stage over 60 s"' in unknown_start
    assert page.count("<polygon") == 2  # waiting from the start, then delivered


async def test_follow_report_samples_the_launch_until_it_settles(
    sandbox: Sandbox,
    client: CampaignClient,
    send: Callable[[], Awaitable[str]],
    settle: Callable[[str], Awaitable[Counter[DeploymentStatus | None]]],
) -> None:
    await sandbox.set_clock(speed=4)  # a campaign of a few seconds
    launch = await send()
    status, samples = await follow_report(client, launch, poll_interval=0.05, max_interval=0.2)
    expected = launch_stages(await settle(launch))

    assert len(samples) >= 3
    assert samples[-1].stages == expected
    assert launch_stages(Counter(d.status for d in status.deployments)) == expected
    assert samples[-1].at - samples[0].at >= timedelta(seconds=1)
    assert [s.at for s in samples] == sorted(s.at for s in samples)


async def test_write_run_report_reads_the_run_from_its_ledger(
    client: CampaignClient, users: list[User], tmp_path: Path
) -> None:
    poll = (await client.list_polls())[0].id
    journal = tmp_path / "runs.db"
    sent = await client.send_bulk(
        poll, users, chunk_size=10, journal=journal, run="r", follow=True, follow_timeout=20
    )
    path = tmp_path / "run.html"
    async with SqliteLedger(journal) as ledger:
        run = await write_run_report(ledger, "r", path, poll_name="<i>Spring</i>")
        whole = await ledger_history(ledger, "r")
        each = [await ledger_history(ledger, "r", launch) for launch in sent.launch_request_ids]

    page = path.read_text(encoding="utf-8")
    launches = [launch for launch in run.launches if isinstance(launch, LaunchSummary)]
    assert [launch.launch_request_id for launch in launches] == sent.launch_request_ids
    # The run's history is its launches' added up: the launch's is the filtered case.
    assert whole[-1].stages == total_stages([samples[-1].stages for samples in each])
    assert whole[-1].stages == total_stages([launch.stages for launch in launches])
    assert whole[-1].stages.total == len(users)
    assert len(whole) >= 2
    assert outside_references(page) == []
    assert "<i>Spring</i>" not in page
    assert "&lt;i&gt;Spring&lt;/i&gt;" in page
    for reason, count in whole[-1].stages.failures:
        assert f'data-reason="{reason}">{count}<' in page
    for launch in sent.launch_request_ids:
        assert f'data-launch="{launch}"' in page
