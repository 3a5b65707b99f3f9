"""An SQLite ledger runs a claim's transaction whole in its thread, its end
with it, and lets the next transaction queue behind it at once: cancelled
while the thread runs it, the claim takes nothing (rolled back there), and
the operations queued behind it run on a ledger with no transaction open."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers.ledgers import cancel_while_it_begins, people

from campaignkit.errors import LedgerError
from campaignkit.ledger import PLANNED, SqliteLedger

RUN = "run 1"


async def test_a_claim_cancelled_while_the_thread_runs_it_takes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SqliteLedger(tmp_path / "run.db") as ledger:
        await ledger.start_run(RUN, "p1")
        await ledger.plan(RUN, "c1", people(3))
        await cancel_while_it_begins(ledger, monkeypatch, ledger.claim(RUN, "c1"))
        # Queued behind the cancelled claim: it was rolled back, not committed.
        assert (await asyncio.wait_for(ledger.counts(RUN), 10))[PLANNED] == 3
        claim = await ledger.claim(RUN, "c1")
        assert claim is not None
        assert len(claim.recipients) == 3


async def test_a_claim_that_fails_in_the_thread_leaves_no_transaction_open(
    tmp_path: Path,
) -> None:
    async with SqliteLedger(tmp_path / "run.db") as ledger:
        await ledger.start_run(RUN, "p1")
        await ledger.plan(RUN, "c1", people(3))
        opened_as = ledger.identity
        ledger._identity = "another ledger"
        with pytest.raises(LedgerError, match="replaced while in use"):
            await ledger.claim(RUN, "c1")
        ledger._identity = opened_as
        claim = await asyncio.wait_for(ledger.claim(RUN, "c1"), 10)
        assert claim is not None
        assert len(claim.recipients) == 3


async def test_only_a_claim_waits_for_the_disk(tmp_path: Path) -> None:
    """A claim's commit syncs the write-ahead log (and every commit before it
    with it): its request leaves only then. A plan's and a settle's do not:
    lost to a power cut (never to a crash of the process), the plan is made
    again by the next send, the settle's claim reported ambiguous."""
    async with SqliteLedger(tmp_path / "ledger.db") as ledger:
        await ledger.start_run(RUN, "poll")
        levels: list[str] = []
        conn = ledger.store._conn
        assert conn is not None
        conn.set_trace_callback(
            lambda statement: (
                levels.append(statement)
                if "synchronous" in statement or statement.startswith(("BEGIN", "COMMIT"))
                else None
            )
        )
        await ledger.plan(RUN, "c1", people(3))
        planned = levels[:]
        levels.clear()
        claim = await ledger.claim(RUN, "c1")
        assert claim is not None
        claimed = levels[:]
        levels.clear()
        await ledger.settle(RUN, claim.token, "accepted", launch_request_id="L")
        conn.set_trace_callback(None)
    assert planned == ["PRAGMA synchronous=NORMAL", "BEGIN IMMEDIATE", "COMMIT"]
    assert claimed == ["PRAGMA synchronous=FULL", "BEGIN IMMEDIATE", "COMMIT"]
    assert levels == ["PRAGMA synchronous=NORMAL", "BEGIN IMMEDIATE", "COMMIT"]
