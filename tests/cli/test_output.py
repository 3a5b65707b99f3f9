"""The progress display: a plain line, or rich on a terminal."""

from __future__ import annotations

import io

import orjson
import pytest

from campaignkit._funnel import Funnel
from campaignkit._wire import sansio as wire
from campaignkit.cli import output
from campaignkit.models import CampaignStatus, Deployment
from campaignkit.status import CampaignState, DeploymentStatus


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_plain_and_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = io.StringIO()
    with output.ProgressDisplay(plain, "work", interval=0) as progress:
        progress.update(5, 10, "half")
        progress.update(10, 10, "all")
    lines = plain.getvalue().splitlines()
    assert lines == [
        "work [##########..........] 5/10 half",
        "work [####################] 10/10 all",
    ]

    tty = FakeTTY()
    with output.ProgressDisplay(tty, "work") as progress:
        progress.update(7, 10, "nearly")
    assert "7/10" in tty.getvalue()
    assert "nearly" in tty.getvalue()

    monkeypatch.setattr(output, "rich_available", lambda: False)
    tty = FakeTTY()
    with output.ProgressDisplay(tty, "work") as progress:
        progress.update(3, 4)
    assert (
        tty.getvalue()
        == "\r\x1b[2Kwork [###############.....] 3/4\r\x1b[2Kwork [###############.....] 3/4\n"
    )

    quiet = io.StringIO()
    with output.ProgressDisplay(quiet, "work", enabled=False) as progress:
        progress.update(1, 2)
    assert quiet.getvalue() == ""


def test_a_decoded_status_prints_as_json_like_one_built_by_hand() -> None:
    # A decoded status's deployments are made on access, not a tuple: they
    # print as the same JSON array (they printed as their repr in a string).
    deployment = {
        "conversation_id": "c",
        "service_id": "s",
        "cellphone": "1",
        "business_scope_id": None,
        "username": None,
        "status": "DELIVERED",
    }
    answer = {"launch_request_id": "l", "status": "DONE", "poll_id": 1}
    status = wire.decoder(CampaignStatus)(
        orjson.dumps({**answer, "deployments": [deployment]}), 200, {}
    )
    assert not isinstance(status.deployments, tuple)
    expected = {**answer, "deployments": [deployment], "counts": {"DELIVERED": 1}}
    assert orjson.loads(output.dumps(output.status_json(status))) == expected
    by_hand = CampaignStatus("l", status.status, 1, tuple(status.deployments))
    assert output.dumps(by_hand) == output.dumps(status)


def test_no_opted_out_zero_above_an_opt_out_failure() -> None:
    failed = {"FAILURE_BY_OPTOUT_CONTACT": 3}
    shown = output.funnel_table(Funnel(planned=3, accepted=3, failed=failed))
    assert "opted out" not in shown.replace("the person opted out", "")
    assert "the person opted out of messages" in shown
    said = output.funnel_table(Funnel(planned=3, accepted=3, delivered=3, opted_out=2, followed=3))
    assert [line.split()[:3] for line in said.splitlines() if "opted out" in line] == [
        ["opted", "out", "2"]
    ]


def test_the_status_table_names_the_base_of_its_shares() -> None:
    """Issue 32: ``status`` and ``track`` show each status's share "of
    recipients" (the header said "share"), and the line below says so too."""
    deployments = tuple(
        Deployment(f"c{n}", "s", f"{n}", None, None, status)
        for n, status in enumerate([DeploymentStatus.DELIVERED] * 3 + [None])
    )
    shown = output.status_table(CampaignStatus("l", CampaignState.CLAIMED, 1, deployments))
    assert shown.splitlines()[0].split()[:5] == ["status", "count", "share", "of", "recipients"]
    assert "75%" in shown.splitlines()[2]
    assert shown.splitlines()[-1].startswith("3/4 settled (75% of recipients): ")


def test_the_progress_display_is_named_apart_from_the_progress_update() -> None:
    assert not hasattr(output, "Progress")
    assert output.ProgressDisplay.__name__ == "ProgressDisplay"
