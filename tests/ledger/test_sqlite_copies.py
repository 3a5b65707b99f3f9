"""Copies of an SQLite ledger: while it is in use its latest claims are only
in its ``-wal`` file, so a copy of the file alone is refused, with the ways to
copy it; a copy with its ``-wal``, a copy of a closed ledger and the advised
backup are complete and accepted."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers.sqlite_files import sqlite_file

from campaignkit.errors import LedgerError
from campaignkit.ledger import Ledger, Recipient, SqliteLedger

pytestmark = pytest.mark.timeout(30)

PEOPLE = [Recipient(f"+5730000000{i}", i, '{"cellphone":"x"}') for i in range(5)]


@pytest.fixture
async def in_use(tmp_path: Path) -> AsyncIterator[Ledger]:
    """A ledger in use, holding a claim of its 5 recipients."""
    async with SqliteLedger(tmp_path / "run.db") as ledger:
        await ledger.start_run("r", "1")
        await ledger.plan("r", "c", PEOPLE)
        assert await ledger.claim("r", "c") is not None
        yield ledger


async def in_flight(path: Path) -> int:
    async with SqliteLedger(path) as ledger:
        return (await ledger.counts("r"))["in_flight"]


async def test_a_copy_without_its_wal_is_refused(in_use: Ledger, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    shutil.copyfile(tmp_path / "run.db", copy)
    with pytest.raises(LedgerError) as refused:
        await SqliteLedger(copy).open()
    message = str(refused.value)
    assert "made without its write-ahead log" in message
    assert f"cp {copy} {copy}-wal DEST/" in message
    assert ".backup 'copy.db'" in message
    # What it would have forgotten: the claim (its table, even), so its 5 people would go again.
    with sqlite_file(copy) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "campaignkit_claims" not in tables


async def test_a_copy_with_its_wal_is_accepted(in_use: Ledger, tmp_path: Path) -> None:
    (tmp_path / "copy").mkdir()
    for name in ("run.db", "run.db-wal"):
        shutil.copyfile(tmp_path / name, tmp_path / "copy" / name)
    assert await in_flight(tmp_path / "copy" / "run.db") == 5


async def test_the_advised_backup_is_accepted(in_use: Ledger, tmp_path: Path) -> None:
    copy = tmp_path / "copy.db"
    with sqlite_file(tmp_path / "run.db") as source, sqlite_file(copy) as target:
        source.backup(target)  # what sqlite3's ".backup" does
        target.execute("DELETE FROM campaignkit_sessions")
    assert await in_flight(copy) == 5


async def test_a_copy_of_a_closed_ledger_is_accepted(tmp_path: Path) -> None:
    for _ in range(2):  # and closed again by the process that reopened it
        async with SqliteLedger(tmp_path / "run.db") as ledger:
            await ledger.start_run("r", "1")
            await ledger.plan("r", f"c{_}", PEOPLE[_ * 2 : _ * 2 + 2])
            assert await ledger.claim("r", f"c{_}") is not None
    assert not (tmp_path / "run.db-wal").exists()
    shutil.copyfile(tmp_path / "run.db", tmp_path / "copy.db")
    assert await in_flight(tmp_path / "copy.db") == 4
