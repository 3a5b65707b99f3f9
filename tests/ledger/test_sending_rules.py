"""The ledger's part in protecting the sending line, on every ledger: run
options, the daily limit (atomic at claim time), and each person's line."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from helpers.ledgers import NewLedger, people, send

from campaignkit._report import ZONE_UNKNOWN, deferral_detail
from campaignkit.ledger import (
    ACCEPTED,
    DEFERRED,
    IN_FLIGHT,
    PLANNED,
    SUPPRESSED,
    Ledger,
)
from campaignkit.ledger._sending import DAY

pytestmark = pytest.mark.timeout(60)

RUN = "run-1"


async def states(ledger: Ledger, run: str = RUN) -> Counter[str]:
    return Counter([r.state async for r in ledger.records(run)])


async def test_run_options_are_kept_per_run_and_replaced(ledger: Ledger) -> None:
    assert await ledger.run_options(RUN) == {}
    await ledger.save_run_options(RUN, {"daily_limit": 5, "lines": ["573001"]})
    await ledger.save_run_options("other", {"window": {"start": "09:00:00"}})
    assert await ledger.run_options(RUN) == {"daily_limit": 5, "lines": ["573001"]}
    await ledger.save_run_options(RUN, {})
    assert await ledger.run_options(RUN) == {}
    assert await ledger.run_options("other") == {"window": {"start": "09:00:00"}}


async def test_the_daily_limit_defers_the_rest_of_a_chunk(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "1")
    await ledger.save_run_options(RUN, {"daily_limit": 3})
    assert await send(ledger, RUN, "c1", people(5)) == 3
    records = [r async for r in ledger.records(RUN)]
    assert [r.state for r in records] == [ACCEPTED] * 3 + [DEFERRED] * 2  # input order
    assert "daily limit of 3" in (records[-1].detail or "")
    counts = await ledger.counts(RUN)
    assert (counts[ACCEPTED], counts[DEFERRED]) == (3, 2)
    # The budget is spent: a later chunk is all deferred, and not claimed.
    await ledger.plan(RUN, "c2", people(2, first=10))
    assert await ledger.claim(RUN, "c2") is None
    assert (await states(ledger))[DEFERRED] == 4


async def test_the_budget_counts_every_run_and_people_once(ledger: Ledger) -> None:
    await ledger.start_run("a", "1")
    await ledger.start_run("b", "1")
    assert await send(ledger, "a", "c1", people(3)) == 3  # no limit for run a
    await ledger.save_run_options("b", {"daily_limit": 4})
    # Run b: the three already messaged today cost nothing; one new fits.
    assert await send(ledger, "b", "c1", people(5)) == 4
    assert (await states(ledger, "b")) == Counter({ACCEPTED: 4, DEFERRED: 1})


async def test_refused_requests_do_not_spend_the_budget(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "1")
    await ledger.save_run_options(RUN, {"daily_limit": 2})
    await ledger.plan(RUN, "c1", people(2))
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    await ledger.settle(RUN, claim.token, "rejected", detail="BadRequestError: no")
    assert await send(ledger, RUN, "c2", people(2, first=5)) == 2


async def test_deferred_recipients_are_planned_again_by_a_rerun(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "1")
    await ledger.save_run_options(RUN, {"daily_limit": 2})
    assert await send(ledger, RUN, "c1", people(4)) == 2
    # Before the budget allows: deferred again, never sent earlier.
    held = await ledger.plan(RUN, "c2", people(4))
    assert [r.state for r in held] == [ACCEPTED, ACCEPTED]
    assert await ledger.claim(RUN, "c2") is None
    assert (await states(ledger))[DEFERRED] == 2
    # Once the budget allows (a larger limit here): sent.
    await ledger.save_run_options(RUN, {"daily_limit": 4})
    assert await send(ledger, RUN, "c3", people(4)) == 2
    assert await states(ledger) == Counter({ACCEPTED: 4})


async def test_a_plan_files_deferred_whom_the_rules_cannot_send_and_a_rerun_plans_them(
    ledger: Ledger,
) -> None:
    """A send window with no zone to hold it in: the planner's deferrals,
    filed with their detail, never claimed, planned again by a rerun; a
    suppressed number stays suppressed whatever else is said of it."""
    await ledger.start_run(RUN, "1")
    recipients = people(4)
    await ledger.suppress([recipients[3].phone], reason="opted out")
    why = deferral_detail(ZONE_UNKNOWN, "phonenumbers knows no time zone for this number")
    deferred = {recipients[1].phone: why, recipients[3].phone: why}
    held = await ledger.plan(RUN, "c1", recipients, deferred=deferred)
    assert sorted((r.phone, r.state, r.detail) for r in held) == [
        (recipients[1].phone, DEFERRED, why),
        (recipients[3].phone, SUPPRESSED, "opted out"),
    ]
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    assert [r.phone for r in claim.recipients] == [recipients[0].phone, recipients[2].phone]
    await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id="L")
    report = await ledger.report(RUN)
    assert report.deferred_reasons == {ZONE_UNKNOWN: 1}
    assert (await ledger.counts(RUN))[DEFERRED] == 1
    # Given a zone since: the rerun plans it, and only it.
    held = await ledger.plan(RUN, "c2", recipients)
    assert sorted(r.state for r in held) == [ACCEPTED, ACCEPTED, SUPPRESSED]
    claim = await ledger.claim(RUN, "c2")
    assert claim is not None
    assert [r.phone for r in claim.recipients] == [recipients[1].phone]


async def test_the_budget_frees_after_24_hours(
    new_ledger: NewLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with new_ledger() as ledger:
        await ledger.start_run(RUN, "1")
        await ledger.save_run_options(RUN, {"daily_limit": 2})
        assert await send(ledger, RUN, "c1", people(4)) == 2
        later = time.time() + DAY + 60
        monkeypatch.setattr(time, "time", lambda: later)
        assert await send(ledger, RUN, "c2", people(4)) == 2
        assert await states(ledger) == Counter({ACCEPTED: 4})


async def test_concurrent_claimers_never_exceed_the_budget(new_ledger: NewLedger) -> None:
    """Claims of many chunks at once, each through its own ledger object
    (its own connection): together they take exactly the budget."""
    limit, chunks, size = 7, 8, 3
    async with new_ledger() as setup:
        await setup.start_run(RUN, "1")
        await setup.save_run_options(RUN, {"daily_limit": limit})
        for c in range(chunks):
            await setup.plan(RUN, f"c{c}", people(size, first=c * size))
    claimers = [new_ledger() for _ in range(chunks)]
    for claimer in claimers:
        await claimer.open()
    try:
        claims = await asyncio.gather(
            *(claimer.claim(RUN, f"c{c}") for c, claimer in enumerate(claimers))
        )
    finally:
        for claimer in claimers:
            await claimer.aclose()
    async with new_ledger() as ledger:
        taken = sum(len(claim.recipients) for claim in claims if claim is not None)
        assert taken == limit
        counts = await ledger.counts(RUN)
        assert (counts[IN_FLIGHT], counts[DEFERRED], counts[PLANNED]) == (
            limit,
            chunks * size - limit,
            0,
        )


LINES = ["573001110000", "573002220000", "573003330000"]


async def test_lines_go_round_robin_and_stay_with_each_person(ledger: Ledger) -> None:
    phones = [f"+57300{n:07d}" for n in range(7)]
    first = await ledger.assign_lines(phones[:4], LINES)
    assert [first[p] for p in phones[:4]] == [*LINES, LINES[0]]
    # Later calls: those seen keep their line, new people even the load out.
    again = await ledger.assign_lines(phones, LINES)
    assert {p: again[p] for p in phones[:4]} == first
    load = Counter(again.values())
    assert max(load.values()) - min(load.values()) <= 1
    assert sorted(load.values()) == [2, 2, 3]


async def test_a_person_whose_line_is_gone_gets_another(ledger: Ledger) -> None:
    phone = "+573000000001"
    assert await ledger.assign_lines([phone], LINES[:1]) == {phone: LINES[0]}
    assert await ledger.assign_lines([phone], LINES[1:]) == {phone: LINES[1]}
    assert await ledger.assign_lines([phone], LINES) == {phone: LINES[1]}
    assert await ledger.assign_lines([], LINES) == {}
    assert await ledger.assign_lines([phone], []) == {}


async def test_concurrent_assignments_keep_the_lines_even(new_ledger: NewLedger) -> None:
    callers = [new_ledger() for _ in range(6)]
    for caller in callers:
        await caller.open()
    try:
        results = await asyncio.gather(
            *(
                caller.assign_lines([f"+57300{i * 10 + n:07d}" for n in range(5)], LINES)
                for i, caller in enumerate(callers)
            )
        )
    finally:
        for caller in callers:
            await caller.aclose()
    load = Counter(line for result in results for line in result.values())
    assert sum(load.values()) == 30
    assert max(load.values()) - min(load.values()) <= 1


async def test_people_moved_off_a_line_leave_its_count(ledger: Ledger) -> None:
    moved, stays = "+573000000001", "+573000000002"
    await ledger.assign_lines([moved, stays], LINES[:1])  # both on the first line
    assert await ledger.assign_lines([moved], LINES[1:]) == {moved: LINES[1]}
    # The first line holds one person now, the second one, the third none.
    newcomers = [f"+57301{n:07d}" for n in range(4)]
    assigned = await ledger.assign_lines(newcomers, LINES)
    assert [assigned[p] for p in newcomers] == [LINES[2], LINES[0], LINES[1], LINES[2]]
