"""The progress display: a plain line, or rich on a terminal."""

from __future__ import annotations

import io

import orjson
import pytest

from campaignkit._funnel import Funnel
from campaignkit._wire import sansio as wire
from campaignkit.cli import output
from campaignkit.models import CampaignStatus


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_plain_and_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = io.StringIO()
    with output.Progress(plain, "work", interval=0) as progress:
        progress.update(5, 10, "half")
        progress.update(10, 10, "all")
    lines = plain.getvalue().splitlines()
    assert lines == [
        "work [##########..........] 5/10 half",
        "work [####################] 10/10 all",
    ]

    tty = FakeTTY()
    with output.Progress(tty, "work") as progress:
        progress.update(7, 10, "nearly")
    assert "7/10" in tty.getvalue()
    assert "nearly" in tty.getvalue()

    monkeypatch.setattr(output, "rich_available", lambda: False)
    tty = FakeTTY()
    with output.Progress(tty, "work") as progress:
        progress.update(3, 4)
    assert (
        tty.getvalue()
        == "\r\x1b[2Kwork [###############.....] 3/4\r\x1b[2Kwork [###############.....] 3/4\n"
    )

    quiet = io.StringIO()
    with output.Progress(quiet, "work", enabled=False) as progress:
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
