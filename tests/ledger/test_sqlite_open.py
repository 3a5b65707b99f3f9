"""An SQLite ledger whose opening is cancelled while its thread opens the file
ends that connection (its session too), rather than leaving it to the garbage
collector: Python 3.13 warns of a connection collected unclosed, and its
session row would outlive it."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import warnings
from pathlib import Path

import pytest
from helpers.ledgers import cancel_while_it_begins
from helpers.sqlite_files import sqlite_file

from campaignkit.ledger import SqliteLedger


def ledger_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("campaignkit-ledger")}


def sessions(path: Path) -> int:
    with sqlite_file(path) as conn:
        return int(conn.execute("SELECT count(*) FROM campaignkit_sessions").fetchone()[0])


@pytest.mark.parametrize("delay", [0.0, 0.001, 0.005])
async def test_an_open_cancelled_while_the_file_opens_ends_its_connection(
    tmp_path: Path, delay: float
) -> None:
    path = tmp_path / "run.db"
    before = ledger_threads()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        ledger = SqliteLedger(path)
        opening = asyncio.create_task(ledger.open())
        await asyncio.sleep(delay)
        opening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await opening
        await ledger.aclose()
        # What the opening left is ended in the ledger's thread, which then ends.
        for _ in range(500):
            if not ledger_threads() - before:
                break
            await asyncio.sleep(0.01)
        assert not ledger_threads() - before  # so the file has its sessions table
        for _ in range(500):
            if sessions(path) == 0:
                break
            await asyncio.sleep(0.01)
        gc.collect()
    assert sessions(path) == 0
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


async def test_a_transaction_cancelled_while_it_begins_leaves_none_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Ctrl-C lands while the thread runs ``BEGIN``: the transaction
    it opened is ended, and the ledger's next operation begins its own."""
    async with SqliteLedger(tmp_path / "run.db") as ledger:
        await cancel_while_it_begins(ledger, monkeypatch, ledger.start_run("r1", "p1"))
        info = await asyncio.wait_for(ledger.start_run("r2", "p1"), 10)
        assert info.poll == "p1"
