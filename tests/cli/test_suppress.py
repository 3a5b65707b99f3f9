"""``campaignkit suppress`` (list, add, remove, import) and the suppression
list honoured by ``send --bulk`` and shown by ``runs``, against an in-process
sandbox and an SQLite ledger."""

from __future__ import annotations

import csv
import io
import os
from collections import Counter
from pathlib import Path

import orjson
import pytest
from helpers.cli import run

from campaignkit.cli.context import ExitStatus
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)


def users_csv(path: Path, cellphones: list[str]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["country_code", "cellphone", "name"])
        writer.writerows(("+52", phone, f"user {i}") for i, phone in enumerate(cellphones))
    return path


async def test_add_list_remove(tmp_path: Path) -> None:
    journal = str(tmp_path / "ledger.db")
    added = await run(
        None,
        "suppress",
        "add",
        "+52 55 1234 5678",
        "+525500000001",
        "--journal",
        journal,
        "--create",
    )
    assert added.code == 0, added.err
    assert "added 2 numbers; on the list already: 0" in added.out
    assert added.err.startswith(f"campaignkit: new ledger created: SqliteLedger('{journal}')")
    again = await run(
        None, "suppress", "add", "+525512345678", "--reason", "complaint", "--journal", journal
    )
    assert "added 0 numbers; on the list already: 1" in again.out
    listed = await run(None, "suppress", "list", "--journal", journal, "--json")
    assert listed.code == 0, listed.err
    entries = listed.json()
    assert [(e["phone"], e["reason"], e["source"]) for e in entries] == [
        ("+525500000001", "manual", None),
        ("+525512345678", "manual", None),
    ]
    assert entries[0]["added"].endswith("+00:00")
    table = await run(None, "suppress", "list", "--journal", journal)
    assert "+525512345678" in table.out
    assert "2 numbers on the suppression list" in table.err
    removed = await run(
        None, "suppress", "remove", "+525512345678", "+525599999999", "--journal", journal, "--json"
    )
    assert removed.json() == {"removed": 1, "not_listed": 1}
    listed = await run(None, "suppress", "list", "--journal", journal, "--json")
    assert [e["phone"] for e in listed.json()] == ["+525500000001"]


async def test_import_a_csv_file_with_a_reason(tmp_path: Path) -> None:
    journal = str(tmp_path / "ledger.db")
    file = users_csv(tmp_path / "optouts.csv", ["5500000001", "55 0000 0002", "5500000001"])
    imported = await run(
        None,
        *("suppress", "import", str(file), "--reason", "opted out by mail"),
        *("--journal", journal, "--create"),
    )
    assert imported.code == 0, imported.err
    assert "added 2 numbers" in imported.out
    listed = (await run(None, "suppress", "list", "--journal", journal, "--json")).json()
    assert [(e["phone"], e["reason"], e["source"]) for e in listed] == [
        ("+525500000001", "opted out by mail", "optouts.csv"),
        ("+525500000002", "opted out by mail", "optouts.csv"),
    ]


async def test_bad_input_is_named_and_nothing_is_listed(tmp_path: Path) -> None:
    ledger_file = tmp_path / "ledger.db"
    journal = str(ledger_file)
    bad_csv = users_csv(tmp_path / "bad.csv", ["5500000001", "55x", "5500000003"])
    result = await run(None, "suppress", "import", str(bad_csv), "--journal", journal)
    assert result.code == ExitStatus.USAGE
    assert "line 3" in result.err
    assert "cellphone" in result.err
    bad_json = tmp_path / "bad.json"
    bad_json.write_bytes(
        orjson.dumps(
            [
                {"country_code": "+52", "cellphone": "5500000001"},
                {"country_code": "52", "cellphone": "5500000002"},
            ]
        )
    )
    result = await run(None, "suppress", "import", str(bad_json), "--journal", journal)
    assert result.code == ExitStatus.USAGE
    assert "users[1].country_code" in result.err
    result = await run(None, "suppress", "add", "+525500000001", "5500000002", "--journal", journal)
    assert result.code == ExitStatus.USAGE
    assert "'5500000002': must be a phone number with its country code" in result.err
    result = await run(
        None, "suppress", "add", "+525500000001", "--reason", " ", "--journal", journal
    )
    assert result.code == ExitStatus.USAGE
    assert "--reason must be non-empty text" in result.err
    assert not ledger_file.exists()  # refused before the ledger was opened


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["list", "+525500000001"], "takes no PHONE"),
        (["add"], "needs at least one PHONE"),
        (["remove"], "needs at least one PHONE"),
        (["import"], "needs one FILE"),
        (["remove", "+525500000001", "--reason", "x"], "--reason goes with add or import"),
        (["add", "+525500000001", "--format", "csv"], "--format goes with import"),
        (["list", "--create"], "--create goes with add or import"),
        (["remove", "+525500000001", "--create"], "--create goes with add or import"),
    ],
)
async def test_usage_errors(tmp_path: Path, argv: list[str], message: str) -> None:
    result = await run(None, "suppress", *argv, "--journal", str(tmp_path / "ledger.db"))
    assert result.code == ExitStatus.USAGE
    assert message in result.err


async def test_a_ledger_that_does_not_exist_is_never_created(tmp_path: Path) -> None:
    """Numbers put on a mistyped ledger would protect nobody: every action
    refuses a missing ledger, naming it, unless add or import is told --create."""
    numbers = users_csv(tmp_path / "optouts.csv", ["5500000001"])
    for argv in (
        ["list"],
        ["remove", "+525500000001"],
        ["add", "+525500000001"],
        ["import", str(numbers)],
    ):
        result = await run(None, "suppress", *argv, "--journal", str(tmp_path / "typo.db"))
        assert result.code == ExitStatus.NO_LEDGER, result.err
        assert f"no ledger at '{tmp_path / 'typo.db'}': the file does not exist" in result.err
    assert sorted(os.listdir(tmp_path)) == ["optouts.csv"]  # nor a -wal or -shm


async def test_send_honours_the_list_and_runs_shows_it(sb: Sandbox, tmp_path: Path) -> None:
    async with sb.client() as client:
        poll = str((await client.list_polls())[0].id)
    journal = str(tmp_path / "ledger.db")
    file = users_csv(tmp_path / "users.csv", [f"55{n:08d}" for n in range(6)])
    first = await run(sb, "send", poll, str(file), "--bulk", "--journal", journal, "--run", "one")
    assert first.code == 0, first.err
    listed = await run(
        None, "suppress", "add", "+525500000001", "+525500000004", "--journal", journal
    )
    assert listed.code == 0, listed.err
    second = await run(
        sb, "send", poll, str(file), "--bulk", "--journal", journal, "--run", "two", "--json"
    )
    assert second.code == 0, second.err
    summary = second.json()
    assert summary["counts"]["suppressed"] == 2
    assert summary["counts"]["accepted"] == 4
    assert summary["suppressed"] == [
        {"position": 1, "phone": "+525500000001", "reason": "manual"},
        {"position": 4, "phone": "+525500000004", "reason": "manual"},
    ]
    counts = Counter((await sb.snapshot())["companies"][0]["phone_counts"])
    assert counts["+525500000001"] == counts["+525500000004"] == 1
    assert counts["+525500000000"] == 2
    shown = await run(None, "runs", "two", "--journal", journal, "--json")
    assert shown.json()["counts"]["suppressed"] == 2
    export = await run(None, "runs", "two", "--journal", journal, "--export", "suppressed")
    assert export.code == 0, export.err
    rows = list(csv.DictReader(io.StringIO(export.out)))
    # '+52: a spreadsheet shows it as text, not a formula; `send` reads +52.
    assert [(r["country_code"], r["cellphone"], r["name"]) for r in rows] == [
        ("'+52", "5500000001", "user 1"),
        ("'+52", "5500000004", "user 4"),
    ]
    assert "suppression list" in export.err
    # Told to, a run sends them.
    third = await run(
        sb,
        "send",
        poll,
        str(file),
        "--bulk",
        "--journal",
        journal,
        "--run",
        "three",
        "--ignore-suppression",
    )
    assert third.code == 0, third.err
    counts = Counter((await sb.snapshot())["companies"][0]["phone_counts"])
    assert counts["+525500000001"] == 2


async def test_ignore_suppression_needs_a_journal(sb: Sandbox, tmp_path: Path) -> None:
    file = users_csv(tmp_path / "users.csv", ["5500000001"])
    result = await run(sb, "send", "1", str(file), "--bulk", "--ignore-suppression")
    assert result.code == ExitStatus.USAGE
    assert "--ignore-suppression need --journal" in result.err
    result = await run(sb, "send", "1", str(file), "--ignore-suppression")
    assert result.code == ExitStatus.USAGE
    assert "--ignore-suppression needs --bulk" in result.err
