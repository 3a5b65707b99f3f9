"""The progress display: a plain line, or rich on a terminal."""

from __future__ import annotations

import io

import pytest

from campaignkit.cli import output


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
