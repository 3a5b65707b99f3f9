"""A ledger written by the release before people were keyed by their Phone
(``data/ledger-v1.sqlite``, written by campaignkit at 7a0f323) keeps every
promise once opened: nobody of its runs is sent again, nobody on its list is
messaged, one person is one recipient.

The file holds two runs. ``old-run`` sent 6 recipients, two of them the
suppressed ``+44 7700 900123`` and ``+61 412 345 678`` written with their
trunk ``0``, and one UK person twice (``7700900555`` and ``07700900555``).
``cut-run`` was planned and never sent: ``07700900555``, ``07700900777`` and
``7700900777`` (one person), and the suppressed UK number again.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.sqlite_files import sqlite_file

from campaignkit import CampaignClient, User
from campaignkit.ledger import Ledger, PostgresLedger, SqliteLedger
from campaignkit.sandbox import Sandbox

V1 = Path(__file__).parent / "data" / "ledger-v1.sqlite"
TABLES = (
    "campaignkit_runs",
    "campaignkit_run_stops",
    "campaignkit_recipients",
    "campaignkit_claims",
    "campaignkit_chunks",
    "campaignkit_skipped",
    "campaignkit_suppressions",
    "campaignkit_outcomes",
    "campaignkit_followed",
    "campaignkit_run_options",
    "campaignkit_lines",
    "campaignkit_line_load",
)
OLD_INPUT = [
    User(country_code="+44", cellphone="07700900123"),
    User(country_code="+61", cellphone="0412345678"),
    User(country_code="+44", cellphone="7700900555"),
    User(country_code="+44", cellphone="07700900555"),
    User(country_code="+44", cellphone="077 0090 0555"),
    User(country_code="+52", cellphone="15512345678"),
    User(country_code="+57", cellphone="3001234567"),
]


async def sqlite_v1(tmp_path: Path) -> Ledger:
    path = tmp_path / "ledger.sqlite"
    shutil.copy(V1, path)
    return SqliteLedger(path)


async def postgres_v1(dsn: str) -> Ledger:
    """The same rows in a PostgreSQL schema of version 1."""
    import asyncpg

    ledger = PostgresLedger(dsn)
    await ledger.open()  # the tables, as version 1 had them (same columns)
    await ledger.aclose()
    source = sqlite3.connect(V1)
    conn = await asyncpg.connect(dsn)
    try:
        for table in TABLES:
            rows = source.execute(f"SELECT * FROM {table}").fetchall()
            if rows:
                marks = ", ".join(f"${i + 1}" for i in range(len(rows[0])))
                await conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        await conn.execute("UPDATE campaignkit_schema SET version = 1")
    finally:
        await conn.close()
        source.close()
    return PostgresLedger(dsn)


@pytest.fixture(params=["sqlite", "postgres"])
def old_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Awaitable[Ledger]:
    """The version 1 ledger, unopened, in each durable store."""
    if request.param == "sqlite":
        return sqlite_v1(tmp_path)
    return postgres_v1(request.getfixturevalue("postgres_dsn"))


def test_the_fixture_is_a_version_1_ledger() -> None:
    with sqlite_file(V1) as db:
        assert db.execute("SELECT version FROM campaignkit_schema").fetchall() == [(1,)]
        phones = {row[0] for row in db.execute("SELECT phone FROM campaignkit_recipients")}
    assert {"+4407700900123", "+4407700900555", "+447700900555"} <= phones


STORED = (
    # as version 1 filed them
    "+4407700900123",
    "+610412345678",
    "+4407700900555",
    "+5215512345678",
    "+4407700900777",
    # as people are keyed now
    "+447700900123",
    "+61412345678",
    "+447700900555",
    "+525512345678",
    "+573001234567",
    "+447700900777",
)


async def recipients(ledger: Ledger, run: str) -> dict[str, str]:
    """The run's recipients by phone, and their states."""
    return {phone: record.state for phone, (record, _) in (await ledger.held(run, STORED)).items()}


async def test_people_are_rekeyed_and_merged(old_ledger: Awaitable[Ledger]) -> None:
    async with await old_ledger as ledger:
        assert await recipients(ledger, "old-run") == {
            "+447700900123": "accepted",
            "+61412345678": "accepted",
            "+447700900555": "accepted",
            "+525512345678": "accepted",
            "+573001234567": "accepted",
        }
        assert await recipients(ledger, "cut-run") == {
            "+447700900555": "planned",
            "+447700900777": "planned",
            "+447700900123": "planned",
        }
        suppressed = await ledger.suppressed(["+44 07700 900123", "+61 0412 345 678"])
        assert set(suppressed) == {"+447700900123", "+61412345678"}


@pytest.mark.parametrize("run", ["old-run", "cut-run"])
async def test_nobody_is_sent_again_nor_suppressed_people_messaged(
    old_ledger: Awaitable[Ledger], sb: Sandbox, client: CampaignClient, run: str
) -> None:
    sent: Callable[[], Awaitable[dict[str, Any]]] = _phone_counts(sb)
    users = (
        OLD_INPUT
        if run == "old-run"
        else [
            User(country_code="+44", cellphone="07700900555"),
            User(country_code="+44", cellphone="07700900777"),
            User(country_code="+44", cellphone="7700900777"),
            User(country_code="+44", cellphone="07700900123"),
        ]
    )
    async with await old_ledger as ledger:
        info = await ledger.run_info(run)
        assert info is not None
        report = await client.send_bulk(info.poll, users, journal=ledger, run=run, chunk_size=2)
    counts = await sent()
    if run == "old-run":
        assert counts == {}, "the run's people were sent again"
    else:
        assert counts == {"+447700900555": 1, "+447700900777": 1}
        assert report.counts["suppressed"] == 1
    assert "+447700900123" not in counts, "a suppressed person was messaged"


def _phone_counts(sb: Sandbox) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def counts() -> dict[str, Any]:
        snapshot = await sb.snapshot()
        found: dict[str, Any] = snapshot["companies"][0]["phone_counts"]
        return found

    return counts
