"""``sessions`` (every page) against an in-process sandbox."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import orjson
from helpers.cli import (
    first_poll,
    run,
)

from campaignkit._input.csv_files import as_written
from campaignkit.sandbox import Sandbox


async def test_sessions_export_25000_across_pages(sb: Sandbox, tmp_path: Path) -> None:
    poll = await first_poll(sb)
    before = await run(sb, "sessions", str(poll))
    baseline = len(before.out.splitlines())
    await sb.add_sessions(poll, 25_000)
    out = tmp_path / "sessions.jsonl"
    result = await run(sb, "sessions", str(poll), "-o", str(out), "--page-size", "1000")
    assert result.code == 0, result.err
    lines = out.read_text().splitlines()
    assert len(lines) == 25_000 + baseline
    records = [orjson.loads(line) for line in lines]
    assert len({r["id"] for r in records}) == len(records)
    assert {"id", "created_at", "finished_at", "user"} <= set(records[0])
    assert f"wrote {len(lines)} sessions" in result.err
    assert not (tmp_path / "sessions.jsonl.part").exists()


async def test_sessions_csv_since_until(sb: Sandbox) -> None:
    poll = await first_poll(sb)
    now = int(await sb.now())
    await sb.add_sessions(poll, 100, start=now - 100_000, end=now - 90_000)
    result = await run(
        sb,
        "sessions",
        str(poll),
        "--format",
        "csv",
        "--since",
        str(now - 100_000),
        "--until",
        str(now - 89_000),
    )
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert len(rows) == 100
    assert list(rows[0]) == ["id", "created_at", "finished_at", "country_code", "cellphone"]
    assert result.err == "sessions 100 exported\n"  # the progress line, nothing else


async def test_sessions_bad_range_is_usage_error(sb: Sandbox) -> None:
    result = await run(sb, "sessions", "1", "--since", "2025-02-01", "--until", "2025-01-01")
    assert result.code == 2
    assert "--until" in result.err
    result = await run(sb, "sessions", "1", "--since", "yesterday")
    assert result.code == 2


async def test_sessions_csv_is_safe_to_open_in_a_spreadsheet(sb: Sandbox) -> None:
    """A country code such as ``+57`` is a formula to a spreadsheet: the CSV
    writes it as the run export does (``'+57``), which ``as_written`` undoes."""
    poll = await first_poll(sb)
    await sb.add_sessions(poll, 3)
    result = await run(sb, "sessions", str(poll), "--format", "csv")
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert rows
    for row in rows:
        assert row["country_code"].startswith("'+"), row
        assert as_written(row["country_code"]).startswith("+")
        assert not any(cell[:1] in "=+-@" for cell in row.values()), row
