"""``campaignkit runs RUN --export all``: every recipient of a run with what
became of it, as CSV or JSON Lines; no CSV cell runs as a formula in a
spreadsheet, and ``send`` reads the file back as it was written."""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.cli import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaignkit import DeploymentStatus, SessionKey, User, users_from_csv
from campaignkit._input.csv_files import FORMULA_STARTS, RUN_COLUMNS
from campaignkit.cli.input import load_users
from campaignkit.ledger import ACCEPTED, REJECTED, Ledger, Recipient, SqliteLedger, StatusRow
from campaignkit.sandbox import Sandbox
from campaignkit.webhooks import parse_event

pytestmark = pytest.mark.timeout(120)

RUN = "spring"
NASTY = {
    "link": '=HYPERLINK("http://evil.test","click")',
    "cmd": "+cmd|' /C calc'!A0",
    "sum": "-2+3",
    "at": "@SUM(1+1)",
    "tab": "\tstarts with a tab",
    "quoted": "'=already quoted",
    "lines": 'two\nlines, "quoted"\r\nand more',
    "unicode": "Ñandú ✓ 日本",
    "empty": "",
}


def wire(n: int, keys: dict[str, str]) -> dict[str, Any]:
    return {
        "country_code": "+57",
        "cellphone": f"300{n:07d}",
        "user_session_keys": [{"key": k, "value": v} for k, v in keys.items()],
    }


def user_of(line: dict[str, Any]) -> User:
    return User(
        cellphone=line["cellphone"],
        country_code=line["country_code"],
        user_session_keys=[SessionKey(k["key"], k["value"]) for k in line["user_session_keys"]],
    )


async def fill(ledger: Ledger, people: list[dict[str, Any]]) -> None:
    """The run: its first three people accepted under L1, the rest rejected."""
    await ledger.start_run(RUN, "1001")
    recipients = [
        Recipient(w["country_code"] + w["cellphone"], i, orjson.dumps(w).decode())
        for i, w in enumerate(people)
    ]
    for chunk, part, state in (("c1", recipients[:3], ACCEPTED), ("c2", recipients[3:], REJECTED)):
        if not part:
            continue
        await ledger.plan(RUN, chunk, part)
        claim = await ledger.claim(RUN, chunk)
        assert claim is not None
        if state == ACCEPTED:
            await ledger.settle(RUN, claim.token, state, launch_request_id="L1")
        else:
            await ledger.settle(RUN, claim.token, state, detail="BadRequestError: -> 400: =bad")


def event(kind: str, n: int, **extra: Any) -> Any:
    body = {
        "country_code": "+57",
        "cellphone": f"300{n:07d}",
        "session_id": f"s-{n}",
        "conversation_id": 5000 + n,
        "sent_at": "2026-01-01 00:00:00",
        **extra,
    }
    if kind != "opt_out":
        body[f"{kind}_at"] = "2026-01-01 00:00:05"
    return parse_event(body)


def cells(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def formula_cells(rows: list[list[str]]) -> list[str]:
    return [cell for row in rows for cell in row if cell[:1] and cell[0] in FORMULA_STARTS]


async def test_every_recipient_with_its_outcome_safe_and_read_back(tmp_path: Path) -> None:
    journal = tmp_path / "runs.db"
    people = [wire(n, {**NASTY, "name": f"user {n}"}) for n in range(4)]
    async with SqliteLedger(journal) as ledger:
        await fill(ledger, people)
        status = DeploymentStatus.DELIVERED.value
        await ledger.record_statuses(RUN, [StatusRow("+573000000000", "L1", "5000", status, 60.0)])
        await ledger.record_event(event("delivered", 0))
        await ledger.record_event(event("read", 0))
        await ledger.record_event(event("responded", 0, actual_response="Si", question={}))
        await ledger.record_event(event("opt_out", 1, reason="OPTOUT"))

    out = tmp_path / "all.csv"
    done = await run(
        None, "runs", RUN, "--journal", str(journal), "--export", "all", "-o", str(out)
    )
    assert done.code == 0, done.err
    assert f"wrote 4 recipients of run {RUN} to {out}" in done.err
    rows = cells(out)
    assert rows[0] == ["country_code", "cellphone", "deployment_eta", *NASTY, "name", *RUN_COLUMNS]
    assert formula_cells(rows) == []
    facts = [dict(zip(RUN_COLUMNS, row[-len(RUN_COLUMNS) :], strict=True)) for row in rows[1:]]
    delivered = datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC).isoformat()
    assert facts[0] == {
        "run.phone": "'+573000000000",
        "run.state": ACCEPTED,
        "run.launch": "L1",
        "run.status": "DELIVERED",
        "run.status_at": datetime.fromtimestamp(60, UTC).isoformat(),
        "run.delivered_at": delivered,
        "run.read_at": delivered,
        "run.replied_at": delivered,
        "run.opted_out_at": "",
        "run.error": "",
    }
    assert facts[1]["run.opted_out_at"] == datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    assert (facts[1]["run.status"], facts[1]["run.delivered_at"]) == ("", "")
    assert (facts[3]["run.state"], facts[3]["run.launch"]) == (REJECTED, "")
    assert facts[3]["run.error"] == "BadRequestError: -> 400: =bad"  # as text: no ' needed
    assert [row[:2] for row in rows[1:]] == [["'+57", f"300{n:07d}"] for n in range(4)]

    # Read back as written: the same users, the same session variables.
    assert list(users_from_csv(out)) == [user_of(w) for w in people]
    assert load_users(str(out), None) == [user_of(w) for w in people]

    jsonl = tmp_path / "all.jsonl"
    done = await run(
        None, "runs", RUN, "--journal", str(journal), "--export", "all", "-o", str(jsonl)
    )
    assert done.code == 0, done.err
    lines = [orjson.loads(line) for line in jsonl.read_text("utf-8").splitlines()]
    assert [line["run"] for line in lines] == [
        {fact.removeprefix("run."): value or None for fact, value in f.items()}
        | {"phone": f"+57300{n:07d}"}
        for n, f in enumerate(facts)
    ]
    assert [{k: v for k, v in line.items() if k != "run"} for line in lines] == people
    assert load_users(str(jsonl), None) == [user_of(w) for w in people]
    # --format wins over the file's name.
    done = await run(
        None, "runs", RUN, "--journal", str(journal), "--export", "all", "--format", "csv"
    )
    assert done.out.splitlines()[0].startswith("country_code,cellphone,deployment_eta,")


async def test_an_export_sent_again_gives_the_service_the_same_users(
    sb: Sandbox, tmp_path: Path
) -> None:
    async with sb.client() as client:
        poll = str((await client.list_polls())[0].id)
    users = tmp_path / "users.csv"
    with users.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["country_code", "cellphone", *NASTY])
        writer.writerows(["57", f"300{n:07d}", *NASTY.values()] for n in range(3))
    journal = ("--journal", str(tmp_path / "runs.db"))
    sent = await run(sb, "send", poll, str(users), "--bulk", "--run", RUN, *journal)
    assert sent.code == 0, sent.err
    out = tmp_path / "all.csv"
    done = await run(None, "runs", RUN, *journal, "--export", "all", "-o", str(out))
    assert done.code == 0, done.err
    again = await run(sb, "send", poll, str(out), "--bulk", "--run", "again", *journal)
    assert again.code == 0, again.err
    first, second = (await sb.snapshot())["companies"][0]["launches"]
    fields = ("country_code", "cellphone", "user_session_keys", "deployment_eta")
    assert [{k: u[k] for k in fields} for u in second["users"]] == [
        {k: u[k] for k in fields} for u in first["users"]
    ]
    # The hand-written "'=already quoted" reads as a spreadsheet shows it.
    read = {**NASTY, "quoted": "=already quoted"}
    assert second["users"][0]["user_session_keys"] == [
        {"key": k, "value": v} for k, v in read.items()
    ]


async def test_a_session_variable_named_as_a_column_is_refused_in_csv(tmp_path: Path) -> None:
    journal = tmp_path / "runs.db"
    async with SqliteLedger(journal) as ledger:
        await fill(ledger, [wire(0, {"run.state": "mine"})])
    refused = await run(None, "runs", RUN, "--journal", str(journal), "--export", "all")
    assert refused.code == 2
    assert f"run {RUN} has session variable: 'run.state', named as" in refused.err
    assert "--format jsonl" in refused.err
    kept = await run(
        None, "runs", RUN, "--journal", str(journal), "--export", "all", "--format", "jsonl"
    )
    assert kept.code == 0, kept.err
    assert orjson.loads(kept.out)["user_session_keys"] == [{"key": "run.state", "value": "mine"}]


async def test_format_needs_an_export(tmp_path: Path) -> None:
    journal = tmp_path / "runs.db"
    async with SqliteLedger(journal) as ledger:
        await fill(ledger, [wire(0, {})])
    refused = await run(None, "runs", RUN, "--journal", str(journal), "--format", "csv")
    assert refused.code == 2
    assert "--format needs --export" in refused.err


# Session variables as people and spreadsheets write them: formula starts,
# quotes, line breaks, any text UTF-8 can carry. Names are written without
# surrounding spaces (the reader strips a header's), and apart from the
# file's own columns.
texts = st.text(st.characters(codec="utf-8"), max_size=20)
formula_like = st.builds(
    lambda start, rest: start + rest, st.sampled_from([*FORMULA_STARTS, "'", "''="]), texts
)
values = st.one_of(texts, formula_like)
taken = {"country_code", "cellphone", "deployment_eta", *RUN_COLUMNS}
names = st.one_of(texts, formula_like).filter(lambda n: n and n == n.strip() and n not in taken)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    keys=st.lists(names, unique=True, max_size=4),
    rows=st.lists(st.lists(values, min_size=4, max_size=4), min_size=1, max_size=3),
)
async def test_any_session_variables_round_trip_and_no_cell_is_a_formula(
    tmp_path_factory: pytest.TempPathFactory, keys: list[str], rows: list[list[str]]
) -> None:
    where = tmp_path_factory.mktemp("export")
    people = [wire(n, dict(zip(keys, row, strict=False))) for n, row in enumerate(rows)]
    async with SqliteLedger(where / "runs.db") as ledger:
        await fill(ledger, people)
    out = where / "all.csv"
    done = await run(
        None, "runs", RUN, "--journal", str(where / "runs.db"), "--export", "all", "-o", str(out)
    )
    assert done.code == 0, done.err
    assert formula_cells(cells(out)) == []
    assert list(users_from_csv(out)) == [user_of(w) for w in people]
