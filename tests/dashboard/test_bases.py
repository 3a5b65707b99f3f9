"""What the dashboard, its reports and ``campaignkit runs`` say of a run
(issue 32 point 3): every share names its base, one base per figure on every
screen; a run nobody followed says "not followed", never "delivered 0"; a
launch shows when it was sent. Over real HTTP against the sandbox."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import attrs
import pytest
from helpers.cli import run as cli
from helpers.servers import serving

from campaignkit import CampaignClient, User
from campaignkit.dashboard import Dashboard, dashboard_app, render_report
from campaignkit.ledger import Ledger
from campaignkit.models import CampaignStatus
from campaignkit.status import CampaignState

from .test_app import FAST
from .test_listing import claimed_at, get, section

pytestmark = pytest.mark.timeout(60)

SHARE = re.compile(r"(?:<0\.1|\d+(?:\.\d)?)%(?: of (\w+))?")


def shares(page: str) -> list[tuple[str, str]]:
    """Every share a reader sees on ``page`` (style, script and attributes
    aside), with the base it names ("" for none)."""
    text = re.sub(r"<(style|script)[^>]*>.*?</\1>", " ", page, flags=re.DOTALL)
    text = re.sub(r"<[^>]+>", " ", text)
    return [(m.group(0), m.group(1) or "") for m in SHARE.finditer(text)]


def step(row: str, name: str) -> str:
    """What the run's funnel says of step ``name``."""
    found = re.search(rf'<span class="step" data-step="{name}"[^>]*>([^<]*)</span>', row)
    assert found is not None, row
    return found.group(1)


@attrs.frozen
class Screens:
    """A run nobody followed ("quiet") and a followed one ("loud", with its
    first ``launch``) on every screen."""

    page: str
    launch_page: str
    quiet_report: str
    loud_report: str
    launch_report: str
    launch: str
    delivered: int
    recipients: int

    def all(self) -> tuple[str, ...]:
        return (
            self.page,
            self.launch_page,
            self.quiet_report,
            self.loud_report,
            self.launch_report,
        )


@pytest.fixture
async def screens(client: CampaignClient, ledger: Ledger, users: list[User]) -> Screens:
    poll = (await client.list_polls())[0]
    await client.send_bulk(poll.id, users, chunk_size=15, journal=ledger, run="quiet")
    followed = await client.send_bulk(poll.id, users, journal=ledger, run="loud", follow=True)
    assert followed.funnel is not None
    assert followed.funnel.delivered
    launch = followed.launch_request_ids[0]
    dashboard = Dashboard(client, ledger=ledger, **FAST)
    async with serving(dashboard_app(dashboard)) as url, aiohttp.ClientSession() as http:
        return Screens(
            await get(http, f"{url}/"),
            await get(http, f"{url}/launches/{launch}"),
            await get(http, f"{url}/runs/quiet/report.html"),
            await get(http, f"{url}/runs/loud/report.html"),
            await get(http, f"{url}/launches/{launch}/report.html"),
            launch,
            followed.funnel.delivered,
            len(users),
        )


async def test_a_run_nobody_followed_says_not_followed_not_delivered_0(
    screens: Screens, tmp_path: Path
) -> None:
    quiet = section(screens.page, '<section class="run" data-run="quiet">')
    for screen in (quiet, screens.quiet_report):
        for name in ("delivered", "read", "replied"):
            assert step(screen, name) == f"{name}: not followed"
        assert "delivered 0" not in screen
    table = await cli(None, "runs", "quiet", "--journal", str(tmp_path / "runs.db"))
    assert re.search(r"^delivered\s+-\s+not followed$", table.out, re.MULTILINE), table.out


async def test_every_share_names_its_base_and_one_figure_has_one_base(screens: Screens) -> None:
    for screen in screens.all():
        assert shares(screen)
        assert {base for _, base in shares(screen)} <= {"recipients", "failed"}, shares(screen)
    # The run's delivered share, the same in its row, its funnel and its report's bars.
    loud = section(screens.page, '<section class="run" data-run="loud">')
    share = f"{screens.delivered * 100 // screens.recipients}% of recipients"
    for screen in (loud, screens.loud_report):
        assert step(screen, "delivered") == f"delivered {screens.delivered} ({share})"
    bars = screens.loud_report[screens.loud_report.index('<div id="funnel">') :]
    bar = bars[bars.index('data-stage="delivered"') :]
    assert bar[: bar.index("</li>")].endswith(f'<span class="share">{share}</span>')


async def test_a_launch_shows_when_it_was_sent(screens: Screens, ledger: Ledger) -> None:
    # Its claim in the ledger: not when the dashboard began watching it.
    sent = f"{await claimed_at(ledger, 'loud', screens.launch):%Y-%m-%d %H:%M:%S} UTC"
    assert f'<time class="sent">{sent}</time>' in screens.launch_page
    assert f'<time class="sent">{sent}</time>' in screens.launch_report
    loud = section(screens.page, '<section class="run" data-run="loud">')
    row = loud[loud.index(f'<tr data-launch="{screens.launch}"') :]
    assert f'<time class="sent">{sent}</time>' in row[: row.index("</tr>")]
    for screen in screens.all():
        assert "watched since" not in screen


def test_a_launch_no_ledger_sent_says_its_sending_time_is_not_known() -> None:
    page = render_report(CampaignStatus("l", CampaignState.DONE, 7, ()), now=datetime.now(UTC))
    assert re.search(r"sent at</dt><dd><span[^>]*>not known</span>", page)
