"""Paused runs, on every ledger: a claim of a paused run takes nothing (in
its transaction, so every worker at once), its chunk stays planned, a
resumed run is sent; a template paused by the network pauses every running
run."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from helpers.ledgers import NewLedger, people

from campaignkit import ValidationError
from campaignkit.errors import LedgerError
from campaignkit.ledger import (
    ACCEPTED,
    DEFERRED,
    PLANNED,
    Ledger,
    LedgerUnavailable,
    RunPause,
)
from campaignkit.webhooks import EventKind, WebhookEvent, parse_event

pytestmark = pytest.mark.timeout(60)

RUN = "run-1"


async def states(ledger: Ledger, run: str = RUN) -> Counter[str]:
    return Counter([r.state async for r in ledger.records(run)])


async def test_a_paused_run_is_claimed_by_no_one_and_stays_planned(
    new_ledger: NewLedger,
) -> None:
    async with new_ledger() as ledger, new_ledger() as other_worker:
        await ledger.start_run(RUN, "1")
        await ledger.plan(RUN, "c1", people(3))
        assert await ledger.pause_run(RUN, "breaker", "60% of 5 settled recipients failed")
        # Another connection (a worker elsewhere) sees it in the claim's transaction.
        assert await other_worker.claim(RUN, "c1") is None
        assert await ledger.claim(RUN, "c1") is None
        assert await states(ledger) == Counter({PLANNED: 3})
        info = await other_worker.run_info(RUN)
        assert info is not None
        assert info.paused is not None
        assert (info.paused.reason, info.paused.detail) == (
            "breaker",
            "60% of 5 settled recipients failed",
        )
        assert [run.paused for run in await ledger.runs()] == [info.paused]
        # Resumed: the chunk left planned is sent.
        assert await other_worker.resume_run(RUN) == 3
        assert (await ledger.run_info(RUN)).paused is None  # type: ignore[union-attr]
        claim = await ledger.claim(RUN, "c1")
        assert claim is not None
        assert len(claim.recipients) == 3


async def test_the_first_pause_stays_until_resumed(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "1")
    assert await ledger.pause_run(RUN, "canary", "first")
    assert not await ledger.pause_run(RUN, "breaker", "second")
    info = await ledger.run_info(RUN)
    assert info is not None
    assert info.paused is not None
    assert (info.paused.reason, info.paused.detail) == ("canary", "first")
    assert await ledger.resume_run(RUN) == 0
    assert await ledger.resume_run(RUN) == 0  # not paused: nothing to do
    assert await ledger.pause_run(RUN)  # by hand
    info = await ledger.run_info(RUN)
    assert info is not None
    assert info.paused == RunPause("manual", "paused by hand", info.paused.paused_at)  # type: ignore[union-attr]


async def test_pausing_refuses_a_missing_run_and_bad_fields(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="no run 'nope'"):
        await ledger.pause_run("nope", "breaker", "x")
    with pytest.raises(LedgerError, match="no run 'nope'"):
        await ledger.resume_run("nope")
    await ledger.start_run(RUN, "1")
    with pytest.raises(ValidationError) as raised:
        await ledger.pause_run(RUN, " ", 3)  # type: ignore[arg-type]
    assert {field for field, _ in raised.value.problems} == {"reason", "detail"}


async def test_a_paused_runs_report_defers_its_planned_recipients(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "1")
    await ledger.plan(RUN, "c1", people(2))
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id="L")
    await ledger.plan(RUN, "c2", people(3, first=10))
    await ledger.pause_run(RUN, "breaker", "30% of 500 settled recipients failed (150)")
    report = await ledger.report(RUN)
    assert report.paused == "breaker: 30% of 500 settled recipients failed (150)"
    assert report.counts["accepted"] == 2
    assert report.counts["deferred"] == 3
    assert report.counts["rejected"] == 0
    assert report.deferred_reasons == {"paused": 3}
    assert (await ledger.counts(RUN))[PLANNED] == 3  # the ledger keeps them planned
    assert await ledger.stall(RUN, stall_after=0.0) is None  # paused, not stalled
    await ledger.resume_run(RUN)
    report = await ledger.report(RUN)
    assert report.paused is None
    assert report.counts["rejected"] == 3  # planned, not sent: as before pauses
    assert DEFERRED not in {state for state, n in (await states(ledger)).items() if n}


def template_event(status: str) -> WebhookEvent:
    return parse_event(
        {
            "event_type": "hsm.status",
            "name": "welcome_v2",
            "status": status,
            "timestamp": "2026-01-05T10:00:00Z",
        }
    )


async def test_a_paused_template_pauses_every_running_run(ledger: Ledger) -> None:
    event = template_event("PAUSED")
    assert event.kind is EventKind.TEMPLATE_STATUS
    for run in ("a", "b", "done", "stopped"):
        await ledger.start_run(run, "1")
        await ledger.plan(run, "c1", people(2))
    # "done": every recipient accepted and its input read; "stopped": a fatal answer.
    claim = await ledger.claim("done", "c1")
    assert claim is not None
    await ledger.settle("done", claim.token, ACCEPTED, launch_request_id="L")
    await ledger.finish_input("done", 2)
    await ledger.stop_run("stopped", "AuthenticationError: 401")
    await ledger.record_event(event)
    paused = {info.run: info.paused for info in await ledger.runs()}
    assert paused["done"] is None
    assert paused["stopped"] is None
    for run in ("a", "b"):
        pause = paused[run]
        assert pause is not None
        assert pause.reason == "template"
        assert pause.detail == "template welcome_v2 is PAUSED (its webhook at 2026-01-05 10:00 UTC)"
        assert await ledger.claim(run, "c1") is None
    # Approved again: a person resumes (the network's word is not taken back by itself).
    await ledger.record_event(template_event("APPROVED"))
    assert (await ledger.run_info("a")).paused is not None  # type: ignore[union-attr]


async def test_an_approved_template_pauses_nothing(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "1")
    await ledger.plan(RUN, "c1", people(1))
    await ledger.record_event(template_event("APPROVED"))
    assert (await ledger.run_info(RUN)).paused is None  # type: ignore[union-attr]


class CommitAnswerLost:
    """``ledger``'s store, whose next transaction commits and then loses its
    answer (the connection dropped during COMMIT), ``meanwhile`` run first."""

    def __init__(self, ledger: Ledger, meanwhile: Callable[[], Awaitable[object]]) -> None:
        self._store, self._meanwhile, self._armed = ledger.store, meanwhile, True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @contextlib.asynccontextmanager
    async def transaction(self, *, durable: bool = True) -> AsyncIterator[Any]:
        async with self._store.transaction(durable=durable) as tx:
            yield tx
        if self._armed:
            self._armed = False
            await self._meanwhile()
            raise LedgerUnavailable("connection lost during COMMIT")


async def test_a_claim_whose_commit_was_lost_gives_back_what_it_took_when_paused_meanwhile(
    new_ledger: NewLedger,
) -> None:
    async with new_ledger() as ledger, new_ledger() as person:
        await ledger.start_run(RUN, "1")
        await ledger.plan(RUN, "c1", people(3))
        ledger.store = CommitAnswerLost(ledger, lambda: person.pause_run(RUN))
        # Committed once, run again: the run is paused by then, so nothing is sent.
        assert await ledger.claim(RUN, "c1") is None
        assert await states(ledger) == Counter({PLANNED: 3})
        await person.resume_run(RUN)
        claim = await ledger.claim(RUN, "c1")
        assert claim is not None
        assert len(claim.recipients) == 3
        await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id="L")
        assert await ledger.expire(RUN, now=time.time() + 10 * ledger.claim_ttl) == 0
        assert await states(ledger) == Counter({ACCEPTED: 3})


async def test_a_claim_whose_commit_was_lost_takes_back_what_it_holds(
    new_ledger: NewLedger,
) -> None:
    async with new_ledger() as ledger, new_ledger() as other:
        await ledger.start_run(RUN, "1")
        await ledger.plan(RUN, "c1", people(3))
        ledger.store = CommitAnswerLost(ledger, lambda: other.claim(RUN, "c1"))
        claim = await ledger.claim(RUN, "c1")
        assert claim is not None
        assert len(claim.recipients) == 3
        # Made again from the start, the claim is in flight again, and settles.
        await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id="L")
        assert await ledger.expire(RUN, now=time.time() + 10 * ledger.claim_ttl) == 0
        assert await states(ledger) == Counter({ACCEPTED: 3})


async def test_a_canary_taken_to_judgement_is_recorded_with_its_pause_for_good(
    new_ledger: NewLedger,
) -> None:
    async with new_ledger() as ledger, new_ledger() as other:
        await ledger.start_run(RUN, "1")
        await ledger.start_run("held", "1")
        assert await ledger.pause_run("held", "breaker", "60% failed")
        # Paused already by another guard: neither paused again nor recorded.
        assert not await ledger.judge_canary("held", "judging its first 10 recipients")
        assert (await other.run_info("held")).canary_judged is None  # type: ignore[union-attr]
        before = time.time()
        assert await ledger.judge_canary(RUN, "judging its first 10 recipients")
        info = await other.run_info(RUN)
        assert info is not None
        assert info.paused is not None
        assert (info.paused.reason, info.paused.detail) == (
            "canary",
            "judging its first 10 recipients",
        )
        assert info.canary_judged == info.paused.paused_at >= before
        # Resumed, and paused again: the first judgement stays recorded.
        await other.resume_run(RUN)
        assert await ledger.judge_canary(RUN, "judging again")
        runs = {run.run: run for run in await other.runs()}
        assert runs[RUN].canary_judged == info.canary_judged
        assert runs["held"].canary_judged is None
        with pytest.raises(LedgerError, match="no run 'nope'"):
            await ledger.judge_canary("nope", "judging")
