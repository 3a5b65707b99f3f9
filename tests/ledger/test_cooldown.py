"""The cool-down and open conversations, on every ledger: kept with the
run's options and applied at claim, across every run of the ledger, the
people they keep back deferred with their reason, sent by a rerun once
allowed."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from helpers.ledgers import people, send

from campaignkit._guards import guard_options
from campaignkit.ledger import ACCEPTED, DEFERRED, Ledger, Recipient
from campaignkit.webhooks import WebhookEvent, parse_event

pytestmark = pytest.mark.timeout(60)

DAY = timedelta(hours=24)


async def reasons(ledger: Ledger, run: str) -> Counter[str]:
    found = [(r.detail or "").split(":")[0] async for r in ledger.records(run, [DEFERRED])]
    return Counter(found)


def reply(recipient: Recipient, at: datetime) -> WebhookEvent:
    return parse_event(
        {
            "session_id": "s-1",
            "responded_at": at.strftime("%Y-%m-%d %H:%M:%S.%f"),
            "actual_response": {"text": "yes"},
            "user": {"country_code": "+57", "cellphone": recipient.phone[3:]},
        }
    )


async def test_a_cooldown_defers_people_another_run_messaged(ledger: Ledger) -> None:
    for run in ("first", "second"):
        await ledger.start_run(run, "1")
    assert await send(ledger, "first", "c1", people(3)) == 3
    await ledger.save_run_options("second", guard_options(None, DAY, False))
    # Two of the first run's three, and two new people.
    assert await send(ledger, "second", "c1", people(4, first=1)) == 2
    assert await reasons(ledger, "second") == Counter({"deferred (cooldown)": 2})
    details = {r.detail async for r in ledger.records("second", [DEFERRED])}
    assert all("cool-down of 24 h" in (detail or "") for detail in details)
    # A rerun before the cool-down has passed: deferred again, never sent earlier.
    assert await send(ledger, "second", "c2", people(4, first=1)) == 0
    assert (await ledger.counts("second"))[DEFERRED] == 2
    # A shorter cool-down (as if 24 h had passed): sent.
    await ledger.save_run_options("second", guard_options(None, timedelta(seconds=0.001), False))
    await asyncio.sleep(0.01)
    assert await send(ledger, "second", "c3", people(4, first=1)) == 2
    assert (await ledger.counts("second"))[ACCEPTED] == 4


async def test_a_reply_since_waives_the_cooldown(ledger: Ledger) -> None:
    for run in ("first", "second"):
        await ledger.start_run(run, "1")
    recipients = people(2)
    assert await send(ledger, "first", "c1", recipients) == 2
    await ledger.record_event(reply(recipients[0], datetime.now(UTC) + timedelta(seconds=1)))
    await ledger.save_run_options("second", guard_options(None, DAY, False))
    assert await send(ledger, "second", "c1", recipients) == 1
    deferred = [r.phone async for r in ledger.records("second", [DEFERRED])]
    assert deferred == [recipients[1].phone]


async def test_open_conversations_are_skipped(ledger: Ledger) -> None:
    for run in ("first", "second"):
        await ledger.start_run(run, "1")
    recipients = people(3)
    assert await send(ledger, "first", "c1", recipients) == 3
    now = datetime.now(UTC)
    await ledger.record_event(reply(recipients[0], now - timedelta(hours=2)))
    await ledger.record_event(reply(recipients[1], now - timedelta(hours=30)))
    await ledger.save_run_options("second", guard_options(None, None, True))
    # Only the one who answered in the last 24 h; no cool-down for the others.
    assert await send(ledger, "second", "c1", recipients) == 2
    assert await reasons(ledger, "second") == Counter({"deferred (open conversation)": 1})
    assert [r.phone async for r in ledger.records("second", [DEFERRED])] == [recipients[0].phone]
    report = await ledger.report("second")
    assert report.deferred_reasons == {"open conversation": 1}


async def test_without_the_options_nobody_is_held_back(ledger: Ledger) -> None:
    for run in ("first", "second"):
        await ledger.start_run(run, "1")
    assert await send(ledger, "first", "c1", people(3)) == 3
    assert await send(ledger, "second", "c1", people(3)) == 3
