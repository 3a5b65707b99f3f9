"""``campaignkit analyze`` against the sandbox: the tables, ``--json``, the
range flags, ``-o`` and the usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.cli import run

from campaignkit.sandbox import Sandbox

from .conftest import QUESTIONS, SEEDED, Survey

pytestmark = pytest.mark.timeout(60)


async def test_json_has_the_funnel_and_the_answers(sb: Sandbox, survey: Survey) -> None:
    result = await run(
        sb, "analyze", str(survey.poll_id), "--since", str(survey.sent_after), "--json"
    )
    assert result.code == 0, result.err
    data = result.json()
    assert set(data) == {"poll_id", "since", "until", "funnel", "questions", "over_time"}
    assert data["poll_id"] == str(survey.poll_id)
    assert data["until"] is None
    assert data["funnel"] == {"sessions": 5, "delivered": 5, "read": 3, "replied": 3}
    assert data["questions"] == [
        {
            "question": QUESTIONS[0],
            "answers": 3,
            "sessions": 3,
            "options": [
                {"option": "yes", "answers": 2, "texts": {"YES ": 1, "Yes": 1}},
                {"option": "maybe", "answers": 1, "texts": {"maybe": 1}},
            ],
        },
        {
            "question": QUESTIONS[1],
            "answers": 2,
            "sessions": 2,
            "options": [{"option": "no", "answers": 2, "texts": {" no ": 1, "No": 1}}],
        },
    ]
    assert set(data["over_time"][-1]) == {"at", "sessions", "delivered", "read", "replied"}


async def test_the_tables_name_each_shares_base(sb: Sandbox, survey: Survey) -> None:
    result = await run(sb, "analyze", str(survey.poll_id), "--since", str(survey.sent_after), "-q")
    assert result.code == 0, result.err
    lines = [line.split() for line in result.out.splitlines()]
    assert ["funnel", "sessions", "of", "sessions"] in lines
    assert ["read", "3", "60%"] in lines
    assert ["option", "answers", "of", "answers"] in lines
    assert ["yes", "2", "66%"] in lines
    assert ["no", "2", "100%"] in lines
    assert "3 answers from 3 sessions (60% of sessions)" in result.out
    assert result.err == ""  # -q: no progress


async def test_until_keeps_the_older_sessions_and_progress_goes_to_stderr(
    sb: Sandbox, survey: Survey
) -> None:
    result = await run(
        sb, "analyze", str(survey.poll_id), "--until", str(survey.sent_after - 1), "--json"
    )
    assert result.code == 0, result.err
    assert result.json()["funnel"]["sessions"] == SEEDED
    assert result.err.splitlines()[-1] == f"histories [####################] {SEEDED}/{SEEDED} read"


async def test_output_writes_the_report(sb: Sandbox, survey: Survey, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    result = await run(sb, "analyze", str(survey.poll_id), "-o", str(report), "-q")
    assert result.code == 0, result.err
    text = report.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>")
    assert QUESTIONS[0] in text
    assert "funnel" in result.out  # the tables too


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--since", "2026-02-01", "--until", "2026-01-01"], "--until"),
        (["--page-size", "0"], "--page-size"),
        (["--concurrency", "0"], "--concurrency"),
    ],
)
async def test_bad_flags_are_usage_errors(
    sb: Sandbox, flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = await run(sb, "analyze", "1001", *flags)
    assert result.code == 2
    assert says in result.err + capsys.readouterr().err  # argparse's own errors: sys.stderr
    assert result.out == ""
