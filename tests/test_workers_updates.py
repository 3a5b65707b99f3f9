"""BulkWorkers.updates: a run's throttled ProgressUpdates read from its ledger,
on taskiq's in-memory broker, an SQLite ledger and the sandbox."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from taskiq import InMemoryBroker

from campaignkit import CampaignState, User, ValidationError
from campaignkit.sandbox import Sandbox
from campaignkit.workers import BulkWorkers


async def test_a_run_s_updates_end_with_its_final_counts(sb: Sandbox, tmp_path: Path) -> None:
    broker = InMemoryBroker()
    bulk = BulkWorkers(broker, str(tmp_path / "ledger.db"), client=sb.client)
    with pytest.raises(ValidationError, match="every"):
        bulk.updates("r", every=-1)
    users: list[User | dict[str, str]] = [
        User(country_code="+57", cellphone=f"300{i:07d}") for i in range(50)
    ]
    users += [{"country_code": "+57", "cellphone": "3000000001"}, {"country_code": "x"}]
    await broker.startup()
    try:
        async with bulk, sb.client() as client:
            poll = (await client.list_polls())[0].id
            run = await bulk.submit(poll, users, chunk_size=10)
            async with asyncio.timeout(20):
                updates = [u async for u in bulk.updates(run, every=0.05, poll_interval=0.01)]
    finally:
        await broker.shutdown()
    final = updates[-1]
    assert [u.finished for u in updates] == [False] * (len(updates) - 1) + [True]
    assert (final.done, final.total, final.sent, final.failed) == (52, 52, 50, 1)
    assert final.failures == (("invalid", 1),)
    assert (final.states["duplicate"], final.state) == (1, CampaignState.DONE)
    # The run's funnel rides along, and a person reads it.
    assert final.funnel is not None
    assert (final.funnel.planned, final.funnel.accepted) == (50, 50)
    # Nobody followed the run: its delivery is not known, not 0.
    assert (
        "50 planned → 50 accepted → delivered: not followed → read: not followed → "
        "replied: not followed"
    ) in final.text()
