"""When a run has stalled (issue 32 point 4): recipients still planned, no
fatal answer, and nothing of the run moved for ``stall_after``; derived
from what every ledger keeps."""

from __future__ import annotations

import shlex

from helpers.ledgers import people

from campaignkit.ledger import STALL_AFTER, Ledger, RunInfo, Stall

RUN = "run 1"


async def test_a_run_stalls_when_its_planned_recipients_wait_past_stall_after(
    ledger: Ledger,
) -> None:
    await ledger.start_run(RUN, "12")
    await ledger.plan(RUN, "c1", people(3))
    await ledger.plan(RUN, "c2", people(2, first=3))
    moved = await ledger.last_update(RUN)
    assert moved is not None
    assert await ledger.stall(RUN) is None  # just planned: waiting, not stalled
    assert await ledger.stall(RUN, now=moved + STALL_AFTER - 1) is None
    assert await ledger.stall(RUN, now=moved + STALL_AFTER) == Stall(moved, 5)
    assert await ledger.stall(RUN, stall_after=10, now=moved + 10) == Stall(moved, 5)
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    claimed = await ledger.last_update(RUN)
    assert claimed is not None
    assert await ledger.stall(RUN, stall_after=10, now=claimed + 9) is None  # a claim moved it
    assert await ledger.stall(RUN, stall_after=10, now=claimed + 10) == Stall(claimed, 2)
    assert await ledger.claim(RUN, "c2") is not None
    assert await ledger.stall(RUN, stall_after=10, now=claimed + 3600) is None  # none planned


async def test_a_stopped_or_unknown_run_is_not_stalled(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "12")
    await ledger.plan(RUN, "c1", people(3))
    await ledger.stop_run(RUN, "NotFoundError: no such poll")
    assert await ledger.stall(RUN, stall_after=0) is None
    assert await ledger.stall("no such run", stall_after=0) is None


def test_the_command_quotes_every_value() -> None:
    info = RunInfo("spring 'sale'; rm -rf ~", "12", 0.0)
    command = Stall.command(info, "postgresql://u@h/db?x=1&y=2")
    assert shlex.split(command) == [
        "campaignkit",
        "submit",
        "12",
        "FILE",
        "--broker",
        "BROKER",
        "--journal",
        "postgresql://u@h/db?x=1&y=2",
        "--run",
        "spring 'sale'; rm -rf ~",
    ]
