"""Outcomes: what became of each accepted recipient (statuses from tracking,
webhook facts), the funnel, and the users of a follow-up run, in every ledger."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.ledgers import NewLedger

from campaignkit import DeploymentStatus
from campaignkit.errors import LedgerError, ValidationError
from campaignkit.ledger import (
    ACCEPTED,
    Ledger,
    MemoryLedger,
    Recipient,
    SqliteLedger,
    StatusRow,
)
from campaignkit.ledger._sql import SqlStore
from campaignkit.ledger._sql_held import RUN_OF_PHONE
from campaignkit.webhooks import parse_event

pytestmark = pytest.mark.timeout(30)

RUN = "run-1"
S = DeploymentStatus


def person(n: int, position: int | None = None) -> Recipient:
    wire = {
        "country_code": "+57",
        "cellphone": f"300{n:07d}",
        "user_session_keys": [{"key": "name", "value": f"user {n}"}],
    }
    return Recipient(
        f"+57300{n:07d}", n if position is None else position, orjson.dumps(wire).decode()
    )


async def accept(ledger: Ledger, run: str, chunk: str, numbers: range, launch: str) -> None:
    """Plan, claim and settle ``numbers`` as accepted under ``launch``."""
    await ledger.start_run(run, "1001")
    await ledger.plan(run, chunk, [person(n) for n in numbers])
    claim = await ledger.claim(run, chunk)
    assert claim is not None
    await ledger.settle(run, claim.token, ACCEPTED, launch_request_id=launch)


def status(n: int, value: DeploymentStatus, at: float = 1000.0, launch: str = "L1") -> StatusRow:
    return StatusRow(f"+57300{n:07d}", launch, f"conv-{n}", value.value, at)


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


async def test_statuses_keep_the_last_one_and_its_time(ledger: Ledger) -> None:
    await accept(ledger, RUN, "c1", range(3), "L1")
    await ledger.record_statuses(RUN, [status(0, S.RECEIVED, 1.0), status(1, S.SUCCESS, 1.0)])
    await ledger.record_statuses(
        RUN, [status(0, S.DELIVERED, 2.0), status(1, S.SUCCESS, 5.0)], final=["L1"]
    )
    by_phone = {o.phone: o for o in await ledger.outcomes(RUN)}
    assert set(by_phone) == {"+573000000000", "+573000000001"}
    first = by_phone["+573000000000"]
    assert (first.status, first.status_at) == (S.DELIVERED, datetime.fromtimestamp(2.0, UTC))
    assert (first.launch_request_id, first.conversation_id) == ("L1", "conv-0")
    # The same status seen again (a launch followed again) keeps its first time.
    assert by_phone["+573000000001"].status_at == datetime.fromtimestamp(1.0, UTC)
    assert await ledger.final_launches(RUN) == {"L1"}
    assert await ledger.final_launches("another") == set()


async def test_many_statuses_are_written_at_once(ledger: Ledger) -> None:
    await accept(ledger, RUN, "c1", range(3000), "L1")
    await ledger.record_statuses(RUN, [status(n, S.DELIVERED) for n in range(3000)])
    assert len(await ledger.outcomes(RUN)) == 3000
    assert (await ledger.funnel(RUN)).delivered == 3000


async def test_webhook_events_are_recorded_on_the_newest_accepted_run(ledger: Ledger) -> None:
    await accept(ledger, "old", "c1", range(2), "L0")
    await accept(ledger, RUN, "c2", range(1), "L1")
    await ledger.start_run("planned-only", "1001")
    await ledger.plan("planned-only", "c3", [person(0), person(1)])
    await ledger.record_event(event("delivered", 0))
    await ledger.record_event(event("read", 0))
    await ledger.record_event(event("responded", 0, actual_response="Si", question={}))
    await ledger.record_event(event("responded", 0, actual_response="later", question={}))
    await ledger.record_event(event("opt_out", 1, reason="OPTOUT"))
    await ledger.record_event(event("timeout", 0))  # says nothing of how far they got
    await ledger.record_event(event("delivered", 99))  # nobody's: ignored
    [mine] = await ledger.outcomes(RUN)
    assert mine.phone == "+573000000000"
    assert mine.conversation_id == "5000"
    assert mine.delivered_at == mine.read_at == mine.replied_at
    assert mine.replied_at == datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC)
    assert mine.answer == "Si"  # the first reply's
    assert mine.status is None
    assert mine.opted_out_at is None
    # +573000000001 is accepted in "old" only (planned in a newer run).
    [old] = await ledger.outcomes("old")
    assert old.phone == "+573000000001"
    assert old.opted_out_at == datetime(2026, 1, 1, tzinfo=UTC)
    # A status after the events keeps them.
    await ledger.record_statuses(RUN, [status(0, S.DELIVERED)])
    [mine] = await ledger.outcomes(RUN)
    assert (mine.status, mine.answer) == (S.DELIVERED, "Si")


async def test_the_funnel_counts_each_step_from_the_same_numbers(ledger: Ledger) -> None:
    await accept(ledger, RUN, "c1", range(6), "L1")
    await ledger.plan(RUN, "c2", [person(n) for n in range(6, 8)])
    claim = await ledger.claim(RUN, "c2")
    assert claim is not None
    await ledger.settle(RUN, claim.token, "rejected", detail="400")
    await ledger.record_statuses(
        RUN,
        [
            status(0, S.DELIVERED),
            status(1, S.SUCCESS),
            status(2, S.FAILURE_BY_UNABLE_TO_CONTACT),
            status(3, S.FAILURE_BY_UNABLE_TO_CONTACT),
            status(4, S.FAILURE_BY_OPTOUT_CONTACT),
        ],
    )
    await ledger.record_event(event("read", 1))  # read implies delivered
    await ledger.record_event(event("responded", 0, actual_response="ok"))
    funnel = await ledger.funnel(RUN)
    assert funnel.steps == (
        ("planned", 8),
        ("accepted", 6),
        ("delivered", 2),
        ("read", 2),
        ("replied", 1),
    )
    assert funnel.failed == {"FAILURE_BY_UNABLE_TO_CONTACT": 2, "FAILURE_BY_OPTOUT_CONTACT": 1}
    assert (funnel.rejected, funnel.ambiguous, funnel.suppressed, funnel.deferred) == (2, 0, 0, 0)
    assert funnel.rows()[6] == ("failed: FAILURE_BY_UNABLE_TO_CONTACT", 2)
    report = await ledger.report(RUN)
    assert report.funnel == funnel
    assert orjson.loads(orjson.dumps(funnel.to_json()))["failed"] == dict(funnel.failed)


async def test_follow_up_users_are_those_of_the_chosen_failures(ledger: Ledger) -> None:
    await accept(ledger, RUN, "c1", range(5), "L1")
    await ledger.record_statuses(
        RUN,
        [
            status(0, S.DELIVERED),
            status(1, S.FAILURE_BY_UNABLE_TO_CONTACT),
            status(3, S.FAILURE_BY_TIER_CAPACITY),
            status(4, S.FAILURE_BY_UNABLE_TO_CONTACT),
        ],
    )
    chosen = ledger.follow_up_users(
        RUN, ["FAILURE_BY_UNABLE_TO_CONTACT", S.FAILURE_BY_TIER_CAPACITY]
    )
    if isinstance(ledger, MemoryLedger):
        with pytest.raises(LedgerError, match="durable journal"):
            [user async for user in chosen]
        return
    users = [user async for user in chosen]
    assert [u.cellphone for u in users] == ["3000000001", "3000000003", "3000000004"]
    assert users[0].country_code == "+57"
    assert [k.value for k in users[0].user_session_keys] == ["user 1"]
    assert [u async for u in ledger.follow_up_users(RUN, ["FAILURE_BY_PAYMENT_ISSUE"])] == []


@pytest.mark.parametrize("statuses", [["DELIVERED"], ["NOPE"], [], "SUCCESS"])
async def test_follow_up_statuses_must_be_failures(ledger: Ledger, statuses: Any) -> None:
    with pytest.raises(ValidationError, match="statuses"):
        [u async for u in ledger.follow_up_users(RUN, statuses)]


@pytest.mark.durable
async def test_a_ledger_of_the_earlier_schema_opens_and_gains_outcomes(
    new_ledger: NewLedger,
) -> None:
    async with new_ledger() as ledger:
        await accept(ledger, RUN, "c1", range(1), "L1")
        assert isinstance(ledger.store, SqlStore)
        async with ledger.store.connection() as tx:  # as a ledger of an earlier release is
            await tx.execute("DROP TABLE campaignkit_outcomes")
            await tx.execute("DROP TABLE campaignkit_followed")
    async with new_ledger() as reopened:
        await reopened.record_statuses(RUN, [status(0, S.DELIVERED)])
        assert (await reopened.funnel(RUN)).delivered == 1


async def test_an_event_finds_its_run_without_reading_every_recipient(tmp_path: Path) -> None:
    # SQLite's plan of the lookup: each run's primary key, not a scan of
    # every recipient (a join of runs and recipients scanned them all).
    async with SqliteLedger(tmp_path / "ledger.db") as ledger:
        await accept(ledger, RUN, "c1", range(3), "L1")
        async with ledger.store.connection() as tx:
            plan = await tx.fetch("EXPLAIN QUERY PLAN " + RUN_OF_PHONE, "+573000000001", "accepted")
    steps = [row[-1] for row in plan]
    assert any("USING INDEX" in step and "(run=? AND phone=?)" in step for step in steps), steps
    assert not any(step.startswith("SCAN r") for step in steps), steps


async def test_outcomes_that_forbid_sending_list_the_number(ledger: Ledger) -> None:
    await accept(ledger, RUN, "c1", range(5), "L1")
    await ledger.record_statuses(
        RUN,
        [
            status(0, S.FAILURE_BY_OPTOUT_CONTACT),
            status(1, S.FAILURE_BY_BLOCKED_CONTACT),
            status(2, S.INVALID_PHONE),
            status(3, S.FAILURE_BY_UNABLE_TO_CONTACT),  # temporary: not listed
            status(4, S.DELIVERED),
        ],
    )
    await ledger.record_event(event("opt_out", 4, reason="OPTOUT"))
    await ledger.record_event(event("opt_out", 9, reason="OPTOUT"))  # no run of ours sent it
    listed = {entry.phone: entry async for entry in ledger.suppressions()}
    assert {phone: (e.reason, e.source) for phone, e in listed.items()} == {
        "+573000000000": ("FAILURE_BY_OPTOUT_CONTACT", RUN),
        "+573000000001": ("FAILURE_BY_BLOCKED_CONTACT", RUN),
        "+573000000002": ("INVALID_PHONE", RUN),
        "+573000000004": ("opt_out", RUN),
        "+573000000009": ("opt_out", None),
    }
    # A later run of the same people files the listed ones suppressed.
    await ledger.start_run("run-2", "1001")
    held = await ledger.plan("run-2", "c1", [person(n) for n in range(5)])
    assert {r.phone for r in held if r.state == "suppressed"} == set(listed) - {"+573000000009"}


async def test_launch_phones_are_the_accepted_recipients_of_each_launch_asked(
    ledger: Ledger,
) -> None:
    await accept(ledger, RUN, "c1", range(3), "L1")
    await accept(ledger, RUN, "c2", range(3, 5), "L2")
    await accept(ledger, RUN, "c3", range(5, 6), "L3")
    await accept(ledger, "other", "c1", range(6, 8), "L1")
    await ledger.plan(RUN, "c4", [person(8)])  # planned, not accepted
    found = await ledger.launch_phones(RUN, ["L1", "L2", "L9"])
    assert {launch: sorted(phones) for launch, phones in found.items()} == {
        "L1": ["+573000000000", "+573000000001", "+573000000002"],
        "L2": ["+573000000003", "+573000000004"],
        "L9": [],
    }
    assert await ledger.launch_phones(RUN, []) == {}
    assert await ledger.launch_phones("nope", ["L1"]) == {"L1": []}
