"""The ledger's rules: one conformance suite, run against SQLite, PostgreSQL
and the memory ledger (tests of the SQL schema itself skip the memory one)."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.ledgers import NewLedger, journal_of, people
from helpers.sqlite_files import sqlite_file
from hypothesis import given
from hypothesis import strategies as st

from campaignkit.errors import LedgerError, NotFoundError
from campaignkit.ledger import (
    ACCEPTED,
    AMBIGUOUS,
    DEFERRED,
    IN_FLIGHT,
    PLANNED,
    REJECTED,
    SUPPRESSED,
    Claim,
    Ledger,
    PostgresLedger,
    Recipient,
    Skipped,
    SqliteLedger,
)
from campaignkit.ledger._records import Recipients, positions_of, spans
from campaignkit.ledger._schema import BATCH, SCHEMA_VERSION
from campaignkit.ledger._sql import SqlStore

RUN = "run-1"
CLAIMER = Path(__file__).parent.parent / "helpers" / "ledger_claimer.py"


async def sql(ledger: Ledger, statement: str, *args: Any) -> list[tuple[Any, ...]]:
    """Run raw SQL in one of the ledger's own transactions (either dialect)."""
    assert isinstance(ledger.store, SqlStore), "the SQL schema: mark the test durable"
    async with ledger.store.connection() as tx:
        return await tx.fetch(statement, *args)


async def states(ledger: Ledger, run: str = RUN) -> dict[str, str]:
    return {r.phone: r.state for r in [r async for r in ledger.records(run)]}


async def claimed(ledger: Ledger, chunk: str, run: str = RUN) -> Claim:
    claim = await ledger.claim(run, chunk)
    assert claim is not None
    return claim


# -- schema


@pytest.mark.durable
async def test_schema_created_on_first_use_and_reopened(new_ledger: NewLedger) -> None:
    async with new_ledger() as ledger:
        await ledger.open()  # a second open of an open ledger changes nothing
        await ledger.start_run(RUN, "poll-1")
        await ledger.plan(RUN, "c1", people(3))
    async with new_ledger() as reopened:
        assert await sql(reopened, "SELECT version FROM campaignkit_schema") == [(SCHEMA_VERSION,)]
        assert (await reopened.counts(RUN))[PLANNED] == 3
        assert [r.run for r in await reopened.runs()] == [RUN]


@pytest.mark.durable
async def test_a_newer_schema_version_is_refused(new_ledger: NewLedger) -> None:
    async with new_ledger() as ledger:
        await sql(ledger, "UPDATE campaignkit_schema SET version = version + 1")
    newer = new_ledger()
    with pytest.raises(LedgerError, match="newer than this campaignkit"):
        await newer.open()
    await newer.aclose()


async def test_operations_need_an_open_ledger(new_ledger: NewLedger) -> None:
    ledger = new_ledger()
    with pytest.raises(LedgerError, match="not open"):
        await ledger.counts(RUN)
    await ledger.aclose()
    await ledger.aclose()


async def test_close_is_a_deprecated_alias_of_aclose(new_ledger: NewLedger) -> None:
    ledger = new_ledger()
    await ledger.open()
    with pytest.warns(DeprecationWarning, match="aclose"):
        await ledger.close()
    with pytest.raises(LedgerError, match="not open"):
        await ledger.counts(RUN)


@pytest.mark.parametrize("ttl", [0, -1.0, True, "60"])
def test_claim_ttl_must_be_positive_seconds(new_ledger: NewLedger, ttl: Any) -> None:
    with pytest.raises(LedgerError, match="claim_ttl"):
        new_ledger(claim_ttl=ttl)


@pytest.mark.durable
async def test_database_errors_are_ledger_errors(ledger: Ledger) -> None:
    await sql(ledger, "DROP TABLE campaignkit_recipients")
    with pytest.raises(LedgerError) as caught:
        await ledger.counts(RUN)
    assert type(caught.value) is LedgerError


# -- runs


async def test_runs(ledger: Ledger) -> None:
    first = await ledger.start_run(RUN, "poll-1")
    assert (first.run, first.poll, first.total, first.input_done) == (RUN, "poll-1", None, False)
    assert await ledger.start_run(RUN, "poll-1") == first
    with pytest.raises(LedgerError, match="sends poll poll-1, not poll poll-2"):
        await ledger.start_run(RUN, "poll-2")
    await ledger.start_run("run-2", "poll-2")
    await ledger.finish_input(RUN, 42)
    assert await ledger.run_info("missing") is None
    info = await ledger.run_info(RUN)
    assert info is not None
    assert (info.total, info.input_done) == (42, True)
    assert [r.run for r in await ledger.runs()] == ["run-2", RUN]


async def test_a_run_stopped_by_a_fatal_answer(ledger: Ledger) -> None:
    """The first fatal answer recorded stays, shows in the run's info and
    report (its class rebuilt), and a new pass over the input clears it."""
    gone = "NotFoundError: POST http://x.test/v2/send-campaign/7 -> 404: Poll 7 not found."
    await ledger.start_run(RUN, "poll-1", input_pass="p1")
    await ledger.start_run("run-2", "poll-1")
    await ledger.stop_run("missing", gone)  # no such run: nothing to stop
    await ledger.stop_run(RUN, gone)
    await ledger.stop_run(RUN, "AuthenticationError: a later one")
    info = await ledger.run_info(RUN)
    assert info is not None
    assert info.stopped == gone
    assert await ledger.start_run(RUN, "poll-1") == info
    assert {r.run: r.stopped for r in await ledger.runs()} == {RUN: gone, "run-2": None}
    assert await ledger.run_info("missing") is None
    report = await ledger.report(RUN)
    assert isinstance(report.fatal, NotFoundError)
    assert (report.fatal.status, report.fatal.detail) == (404, "Poll 7 not found.")
    assert (await ledger.report("run-2")).fatal is None

    again = await ledger.start_run(RUN, "poll-1", input_pass="p2")
    assert again.stopped is None
    assert await ledger.run_info(RUN) == again
    assert (await ledger.report(RUN)).fatal is None


async def test_a_claim_carries_its_run_and_options_as_its_transaction_read_them(
    ledger: Ledger,
) -> None:
    """Its sender reads nothing more before the request leaves: the run's
    poll, the fatal answer that stopped it, its send options."""
    gone = "NotFoundError: POST http://x.test/v2/send-campaign/7 -> 404: Poll 7 not found."
    await ledger.start_run(RUN, "poll-1")
    await ledger.save_run_options(RUN, {"lines": ["573001"]})
    await ledger.plan(RUN, "c1", people(2))
    await ledger.plan(RUN, "c2", people(2, first=2))
    first = await claimed(ledger, "c1")
    assert first.run is not None
    assert first.run == await ledger.run_info(RUN)
    assert (first.run.poll, first.run.stopped) == ("poll-1", None)
    assert first.options == {"lines": ["573001"]}
    await ledger.stop_run(RUN, gone)
    await ledger.save_run_options(RUN, {})
    second = await claimed(ledger, "c2")
    assert second.run is not None
    assert second.run.stopped == gone
    assert second.options == {}


# -- planning


async def test_plan_holds_sent_recipients_and_adopts_planned_ones(ledger: Ledger) -> None:
    a, b, c, d, e, f = people(6)
    await ledger.start_run(RUN, "poll-1")
    for chunk, recipient in zip(["ca", "cb", "cc", "cd", "ce"], [a, b, c, d, e], strict=True):
        assert await ledger.plan(RUN, chunk, [recipient]) == []
    await ledger.settle(RUN, (await claimed(ledger, "ca")).token, ACCEPTED, launch_request_id="L1")
    await claimed(ledger, "cb")
    await ledger.settle(RUN, (await claimed(ledger, "cc")).token, AMBIGUOUS, detail="timeout")
    await ledger.settle(RUN, (await claimed(ledger, "cd")).token, REJECTED, detail="400")

    rerun = [Recipient(r.phone, 200 - r.position, r.user) for r in (a, b, c, d, e, f)]
    held = await ledger.plan(RUN, "again", rerun)
    assert {r.phone: (r.state, r.position) for r in held} == {
        a.phone: (ACCEPTED, 0),
        b.phone: (IN_FLIGHT, 1),
        c.phone: (AMBIGUOUS, 2),
        d.phone: (REJECTED, 3),
    }
    assert next(r for r in held if r.phone == a.phone).launch_request_id == "L1"
    assert next(r for r in held if r.phone == d.phone).detail == "400"
    assert await states(ledger) == {
        a.phone: ACCEPTED,
        b.phone: IN_FLIGHT,
        c.phone: AMBIGUOUS,
        d.phone: REJECTED,
        e.phone: PLANNED,
        f.phone: PLANNED,
    }
    # e (planned by an interrupted producer) and the new f go with the new chunk.
    assert {(r.phone, r.position) for r in (await claimed(ledger, "again")).recipients} == {
        (f.phone, 195),
        (e.phone, 196),
    }
    assert await ledger.claim(RUN, "ce") is None

    assert {r.phone for r in await ledger.plan(RUN, "retry", [d, a])} == {a.phone, d.phone}
    assert await ledger.claim(RUN, "retry") is None
    held = await ledger.plan(RUN, "retry", [d, a], retry_rejected=True)
    assert [r.phone for r in held] == [a.phone]
    assert [r.phone for r in (await claimed(ledger, "retry")).recipients] == [d.phone]


async def test_plans_after_plans_of_new_recipients_still_meet_those_the_run_holds(
    new_ledger: NewLedger,
) -> None:
    # A store whose last plan of a run met none of its recipients plans the
    # next one without looking first: each ledger (a process) below has, and
    # its next plan meets the other's recipients all the same.
    a, b, c, d = people(4)
    async with new_ledger() as one, new_ledger() as two:
        await one.start_run(RUN, "poll-1")
        assert await one.plan(RUN, "one-1", [a]) == []
        assert await two.plan(RUN, "two-1", [b]) == []
        sent = await claimed(one, "one-1")
        await one.settle(RUN, sent.token, ACCEPTED, launch_request_id="L1")

        held = await two.plan(RUN, "two-2", [a, c])
        assert [(r.phone, r.state, r.launch_request_id) for r in held] == [
            (a.phone, ACCEPTED, "L1")
        ]
        # b, planned by the other and not claimed, joins this plan's chunk.
        assert await one.plan(RUN, "one-2", [b, d]) == []
        assert await two.claim(RUN, "two-1") is None
        taken = await claimed(one, "one-2")
        assert [r.phone for r in taken.recipients] == [b.phone, d.phone]
        assert [r.phone for r in (await claimed(two, "two-2")).recipients] == [c.phone]
        assert await states(one) == {
            a.phone: ACCEPTED,
            b.phone: IN_FLIGHT,
            c.phone: IN_FLIGHT,
            d.phone: IN_FLIGHT,
        }


async def test_runs_do_not_share_recipients(ledger: Ledger) -> None:
    await ledger.plan(RUN, "c1", people(2))
    assert await ledger.plan("run-2", "c1", people(2)) == []
    await claimed(ledger, "c1")
    assert len((await claimed(ledger, "c1", run="run-2")).recipients) == 2


# -- claiming


async def test_claim_takes_planned_recipients_once_in_input_order(ledger: Ledger) -> None:
    # Phones in the opposite order of their input positions.
    planned = [Recipient(r.phone, 4 - r.position, r.user) for r in people(5)]
    await ledger.plan(RUN, "c1", planned)
    claim = await claimed(ledger, "c1")
    assert claim.chunk == "c1"
    assert [(r.phone, r.position, r.user) for r in claim.recipients] == [
        (r.phone, r.position, r.user) for r in planned[::-1]
    ]
    assert claim.expires == pytest.approx(time.time() + ledger.claim_ttl, abs=5)
    assert await ledger.claim(RUN, "c1") is None
    assert await ledger.claim(RUN, "unknown") is None
    assert set((await states(ledger)).values()) == {IN_FLIGHT}


async def test_a_chunk_as_columns_is_filed_as_its_recipients_would_be(ledger: Ledger) -> None:
    # What send_bulk's planner hands the ledger: the first recipients new to
    # the run, then one it holds (sent), one given twice (the last one is
    # filed) and one planned by another chunk (adopted).
    a, b, c, d, e = people(5)
    await ledger.start_run(RUN, "poll-1")
    await ledger.plan(RUN, "sent", [Recipient(c.phone, 100, c.user)])
    await ledger.settle(RUN, (await claimed(ledger, "sent")).token, ACCEPTED)
    await ledger.plan(RUN, "other", [Recipient(e.phone, 101, e.user)])
    given = [a, b, c, Recipient(a.phone, 3, a.user), Recipient(d.phone, 4, d.user), e]
    chunk = Recipients.of([Recipient(r.phone, i, r.user) for i, r in enumerate(given)])
    held = await ledger.plan(RUN, "chunk", chunk)
    assert [(r.phone, r.position, r.state) for r in held] == [(c.phone, 100, ACCEPTED)]
    claim = await claimed(ledger, "chunk")
    assert [(r.phone, r.position, r.user) for r in claim.recipients] == [
        (b.phone, 1, b.user),
        (a.phone, 3, a.user),
        (d.phone, 4, d.user),
        (e.phone, 5, e.user),
    ]
    assert await ledger.claim(RUN, "other") is None


async def test_concurrent_claims_take_each_recipient_once(new_ledger: NewLedger) -> None:
    chunks = {f"c{i}": people(20, first=20 * i) for i in range(8)}
    async with new_ledger() as producer:
        for chunk, recipients in chunks.items():
            await producer.plan(RUN, chunk, recipients)
    claimers = [new_ledger() for _ in range(4)]
    try:
        await asyncio.gather(*(c.open() for c in claimers))
        results = await asyncio.gather(
            *(c.claim(RUN, chunk) for chunk in chunks for c in claimers for _ in range(3))
        )
    finally:
        await asyncio.gather(*(c.aclose() for c in claimers))
    won = [claim for claim in results if claim is not None]
    taken = Counter(r.phone for claim in won for r in claim.recipients)
    assert taken == Counter(r.phone for recipients in chunks.values() for r in recipients)
    assert max(taken.values()) == 1
    assert sorted(claim.chunk for claim in won) == sorted(chunks)


@pytest.mark.durable
async def test_processes_claim_each_recipient_once(ledger: Ledger) -> None:
    chunks = {f"c{i}": people(25, first=25 * i) for i in range(12)}
    for chunk, recipients in chunks.items():
        await ledger.plan(RUN, chunk, recipients)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(CLAIMER),
            journal_of(ledger),
            RUN,
            str(seed),
            *chunks,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        for seed in range(4)
    ]
    try:
        async with asyncio.timeout(40):
            # Every process has its ledger open before any claims: they race.
            for proc in procs:
                assert proc.stdout is not None
                assert await proc.stdout.readline() == b"ready\n"
            outputs = await asyncio.gather(*(proc.communicate(b"go\n") for proc in procs))
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert [proc.returncode for proc in procs] == [0] * len(procs)
    won = [orjson.loads(out) for out, _ in outputs]
    taken = Counter(phone for claims in won for phones in claims.values() for phone in phones)
    assert taken == Counter(r.phone for recipients in chunks.values() for r in recipients)
    assert max(taken.values()) == 1
    assert len(await ledger.claims(RUN)) == len(chunks)


# -- settling and expiry


async def test_settle(ledger: Ledger) -> None:
    for chunk, first in [("ok", 0), ("no", 10), ("maybe", 20)]:
        await ledger.plan(RUN, chunk, people(2, first=first))
    ok, no, maybe = [await claimed(ledger, chunk) for chunk in ("ok", "no", "maybe")]
    await ledger.settle(RUN, ok.token, ACCEPTED, launch_request_id="L1", ack='{"id": 1}')
    await ledger.settle(RUN, no.token, REJECTED, detail="400 bad poll")
    await ledger.settle(RUN, maybe.token, AMBIGUOUS, detail="connection reset")
    # A settled claim keeps its outcome.
    await ledger.settle(RUN, ok.token, REJECTED, detail="late")
    records = {r.phone: r async for r in ledger.records(RUN)}
    assert {(r.state, r.launch_request_id, r.detail) for r in records.values()} == {
        (ACCEPTED, "L1", None),
        (REJECTED, None, "400 bad poll"),
        (AMBIGUOUS, None, "connection reset"),
    }
    assert [r.state for r in records.values()].count(ACCEPTED) == 2
    assert [c[1:4] for c in await ledger.claims(RUN)] == [
        ("ok", ACCEPTED, '{"id": 1}'),
        ("no", REJECTED, None),
        ("maybe", AMBIGUOUS, None),
    ]
    with pytest.raises(LedgerError, match="not 'planned'"):
        await ledger.settle(RUN, ok.token, PLANNED)


async def test_release_plans_a_claim_that_was_never_sent_again(new_ledger: NewLedger) -> None:
    async with new_ledger(claim_ttl=30) as ledger:
        for chunk, first in [("cut", 0), ("done", 10), ("late", 20)]:
            await ledger.plan(RUN, chunk, people(3, first=first))
        cut, done, late = [await claimed(ledger, chunk) for chunk in ("cut", "done", "late")]
        await ledger.settle(RUN, done.token, ACCEPTED, launch_request_id="L1")
        assert await ledger.expire(RUN, now=late.expires + 1) == 9 - 3  # cut and late
        await ledger.settle(RUN, cut.token, AMBIGUOUS, detail="expired, then said so")
        await ledger.release(RUN, late.token)  # expired: its sender knows better
        await ledger.release(RUN, done.token)  # settled: keeps its outcome
        await ledger.release(RUN, "no-such-claim")
        records = {r.phone: r async for r in ledger.records(RUN)}
        released = {r.phone for r in late.recipients}
        assert {(r.state, r.claim, r.detail) for r in records.values() if r.phone in released} == {
            (PLANNED, None, None)
        }
        counts = await ledger.counts(RUN)
        assert (counts[PLANNED], counts[ACCEPTED], counts[AMBIGUOUS]) == (3, 3, 3)
        # Its chunk's next claim takes them, once; the old claim settles nothing more.
        again = await claimed(ledger, "late")
        assert again.recipients == late.recipients
        assert await ledger.claim(RUN, "late") is None
        await ledger.settle(RUN, late.token, REJECTED, detail="too late")
        assert (await ledger.counts(RUN))[IN_FLIGHT] == 3
        await ledger.release(RUN, again.token)
        assert (await ledger.counts(RUN))[PLANNED] == 3


async def test_expire_only_claims_past_their_deadline(new_ledger: NewLedger) -> None:
    async with new_ledger(claim_ttl=30) as ledger:
        for chunk, first in [("settled", 0), ("open", 10)]:
            await ledger.plan(RUN, chunk, people(3, first=first))
            await ledger.plan("other-run", chunk, people(3, first=first))
        settled = await claimed(ledger, "settled")
        await ledger.settle(RUN, settled.token, ACCEPTED, launch_request_id="L1")
        late = await claimed(ledger, "open")
        await claimed(ledger, "open", run="other-run")

        assert await ledger.expire(RUN, now=late.expires - 1) == 0
        assert await ledger.expire(RUN, now=late.expires + 1) == 3
        assert await ledger.expire(RUN, now=late.expires + 1) == 0
        records = [r async for r in ledger.records(RUN, [AMBIGUOUS])]
        assert {r.phone for r in records} == {r.phone for r in late.recipients}
        assert all("claim expired" in (r.detail or "") for r in records)
        assert (await ledger.counts("other-run"))[IN_FLIGHT] == 3

        # The sender learnt the outcome after all: it wins over the expiry.
        await ledger.settle(RUN, late.token, ACCEPTED, launch_request_id="L2")
        counts = await ledger.counts(RUN)
        assert (counts[ACCEPTED], counts[AMBIGUOUS]) == (6, 0)


# -- reading


async def test_counts_list_every_state(ledger: Ledger) -> None:
    assert await ledger.counts(RUN) == {
        PLANNED: 0,
        IN_FLIGHT: 0,
        ACCEPTED: 0,
        REJECTED: 0,
        AMBIGUOUS: 0,
        SUPPRESSED: 0,
        DEFERRED: 0,
        "invalid": 0,
        "duplicate": 0,
    }
    await ledger.start_run(RUN, "poll-1")
    await ledger.plan(RUN, "c1", people(3))
    await ledger.plan(RUN, "c2", people(2, first=3, position=3))
    await claimed(ledger, "c2")
    await ledger.skip(RUN, [Skipped(5, "invalid", reason="bad phone"), Skipped(6, "duplicate")])
    counts = await ledger.counts(RUN)
    assert (counts[PLANNED], counts[IN_FLIGHT], counts["invalid"], counts["duplicate"]) == (
        3,
        2,
        1,
        1,
    )


async def test_records_are_paged_in_input_order(ledger: Ledger) -> None:
    # Two recipients at each position (a rerun can plan them so): ties are
    # ordered by phone, and must not be lost at a page boundary.
    recipients = [Recipient(r.phone, r.position // 2, r.user) for r in people(24, first=1000)[::-1]]
    await ledger.plan(RUN, "c1", recipients[:12])
    await ledger.plan(RUN, "c2", recipients[12:])
    await claimed(ledger, "c2")
    expected = sorted((r.position, r.phone) for r in recipients)
    for page_size in (1, 4, 5, 24, 100):
        read = [(r.position, r.phone) async for r in ledger.records(RUN, page_size=page_size)]
        assert read == expected, page_size
    in_flight = [r async for r in ledger.records(RUN, [IN_FLIGHT], page_size=5)]
    assert sorted(r.phone for r in in_flight) == sorted(r.phone for r in recipients[12:])
    assert [r async for r in ledger.records(RUN, [])] == []
    assert [r async for r in ledger.records("other-run")] == []


async def test_skipped_inputs_are_those_of_the_current_pass(ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="no run"):
        await ledger.skip(RUN, [Skipped(1, "invalid")])
    await ledger.start_run(RUN, "poll-1", input_pass="first")
    items = [
        Skipped(7, "duplicate", phone="+573000000001"),
        Skipped(2, "invalid", reason="no cellphone", line=3, item='{"x": 1}'),
    ]
    await ledger.skip(RUN, items)
    await ledger.skip(RUN, [Skipped(2, "duplicate")])  # a resumed producer repeats itself
    await ledger.skip(RUN, [])
    assert await ledger.skipped(RUN) == items[::-1]
    assert await ledger.skipped("other-run") == []
    # A rerun in another order: its positions name other inputs.
    await ledger.start_run(RUN, "poll-1", input_pass="second")
    assert await ledger.skipped(RUN) == []
    info = await ledger.run_info(RUN)
    assert info is not None
    assert not info.input_done
    await ledger.skip(RUN, [Skipped(0, "invalid", reason="empty")])
    assert [s.position for s in await ledger.skipped(RUN)] == [0]
    assert (await ledger.counts(RUN))["invalid"] == 1


# -- the producer's chunks


async def test_unenqueued_chunks(ledger: Ledger) -> None:
    for i, chunk in enumerate(["c1", "c2", "c3", "c4"]):
        await ledger.plan(RUN, chunk, people(2, first=2 * i))
    await ledger.mark_enqueued(RUN, "c1")
    await claimed(ledger, "c3")  # claimed: its message was delivered after all
    assert await ledger.unenqueued_chunks(RUN) == ["c2", "c4"]
    await ledger.mark_enqueued(RUN, "c4")
    assert await ledger.unenqueued_chunks(RUN) == ["c2"]
    assert await ledger.unenqueued_chunks("other-run") == []


# -- webhook deliveries


async def test_first_sighting_and_forget(new_ledger: NewLedger) -> None:
    async with new_ledger() as one, new_ledger() as other:
        assert await one.first_sighting("hooks", "s-1")
        assert not await other.first_sighting("hooks", "s-1")
        assert await other.first_sighting("elsewhere", "s-1")
        await one.forget("hooks", "s-1")
        await one.forget("hooks", "never-seen")
        assert await other.first_sighting("hooks", "s-1")
        assert not await one.first_sighting("hooks", "s-1")


async def test_concurrent_first_sightings_have_one_winner(new_ledger: NewLedger) -> None:
    ledgers = [new_ledger() for _ in range(4)]
    try:
        await asyncio.gather(*(ledger.open() for ledger in ledgers))
        seen = await asyncio.gather(
            *(ledger.first_sighting("hooks", key) for key in "abc" for ledger in ledgers)
        )
    finally:
        await asyncio.gather(*(ledger.aclose() for ledger in ledgers))
    assert sum(seen) == 3


# -- store specifics


async def test_sqlite_refuses_an_old_chunk_journal(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite_file(path) as conn:
        conn.execute("CREATE TABLE chunks (id TEXT PRIMARY KEY, state TEXT)")
    async with SqliteLedger(path):  # an empty table holds no run: accepted
        pass
    with sqlite_file(path) as conn:
        conn.execute("INSERT INTO chunks VALUES ('abc', 'sent')")
    ledger = SqliteLedger(path)
    with pytest.raises(LedgerError, match="chunk journal"):
        await ledger.open()
    await ledger.aclose()


@pytest.mark.parametrize("where", ["missing/dir/ledger.db", "."])
async def test_sqlite_bad_path_is_a_ledger_error(tmp_path: Path, where: str) -> None:
    ledger = SqliteLedger(tmp_path / where)
    with pytest.raises(LedgerError) as caught:
        await ledger.open()
    assert type(caught.value) is LedgerError
    await ledger.aclose()


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://ck:s3cr3t@127.0.0.1:1/test",
        "postgresql://ck:s3cr3t@[::1/test",
        "postgresql://ck@127.0.0.1:1/test?password=s3cr3t",
    ],
)
async def test_postgres_unreachable_or_bad_dsn_is_a_ledger_error(dsn: str) -> None:
    ledger = PostgresLedger(dsn)
    with pytest.raises(LedgerError) as caught:
        await ledger.open()
    assert type(caught.value) is LedgerError
    assert "s3cr3t" not in str(caught.value)
    await ledger.aclose()


def test_postgres_repr_hides_the_password() -> None:
    ledger = PostgresLedger("postgresql://ck:s3cr3t@db.example:5432/runs")
    assert repr(ledger) == "PostgresLedger('postgresql://ck:***@db.example:5432/runs')"
    ledger = PostgresLedger("postgresql://ck@db.example/runs?sslmode=require&password=s3cr3t")
    assert repr(ledger) == (
        "PostgresLedger('postgresql://ck@db.example/runs?sslmode=require&password=***')"
    )


async def test_a_write_that_loses_a_conflict_is_run_again(tmp_path: Path) -> None:
    """A deadlock or serialisation failure (PostgreSQL picks a victim) rolls
    the transaction back whole; the ledger runs it again."""
    from contextlib import asynccontextmanager

    from campaignkit.ledger._schema import TransactionConflict
    from campaignkit.ledger._sqlite import SqliteStore

    class Conflicting(SqliteStore):
        conflicts = 0

        @asynccontextmanager
        async def connection(self, *, durable: bool = True) -> Any:
            async with super().connection(durable=durable) as tx:
                yield tx
                if self.conflicts:
                    self.conflicts -= 1
                    raise TransactionConflict("deadlock detected")

    store = Conflicting(tmp_path / "ledger.db")
    ledger = Ledger(store)
    async with ledger:
        await ledger.start_run(RUN, "poll-1")
        await ledger.plan(RUN, "c1", people(2))
        claim = await claimed(ledger, "c1")
        store.conflicts = 2
        await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id="L1")
        assert store.conflicts == 0
        assert (await ledger.counts(RUN))[ACCEPTED] == 2
        store.conflicts = 10
        with pytest.raises(TransactionConflict):
            await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id="L1")
        assert store.conflicts == 4  # six tries, then the conflict is the caller's


async def test_an_sqlite_plan_of_more_values_than_a_statement_takes_is_filed_whole(
    tmp_path: Path,
) -> None:
    """A plan inserts its recipients many rows a statement, as many as the
    file's limit of variables allows (here 1,665 rows of 3, after the 5
    values common to all), then another statement."""
    async with SqliteLedger(tmp_path / "ledger.db") as ledger:
        assert ledger.store._conn is not None
        ledger.store._conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, BATCH)
        await ledger.start_run(RUN, "poll-1")
        given = people(2000)
        # Python 3.12 deprecates numbered placeholders bound from a sequence
        # (3.14 refuses them): they are bound by name.
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            assert await ledger.plan(RUN, "c1", given) == []
        claim = await claimed(ledger, "c1")
        assert list(claim.recipients) == given
        assert (await ledger.counts(RUN))[IN_FLIGHT] == 2000


async def test_recipients_keep_the_indexes_that_settles_the_limit_and_reports_use(
    tmp_path: Path,
) -> None:
    """An index of the recipients holding their state is rewritten at every
    move of one (claim, settle): those kept are of their run and chunk, and
    (partial) of the rows not planned, which no claim writes. A claim's
    recipients (a settle, the daily limit's count) are found through the
    first, a report's rows not planned through the second, never by reading
    them all. A ledger made with the older indexes loses them when opened."""
    from campaignkit.ledger._sql_held import TAKEN, UNPLANNED

    path = tmp_path / "ledger.db"
    async with SqliteLedger(path) as ledger:
        await sql(ledger, "DROP INDEX campaignkit_recipients_run_chunk")
        for name, columns in [("state", "run, state"), ("chunk", "run, chunk, state")]:
            await sql(
                ledger,
                f"CREATE INDEX campaignkit_recipients_{name} ON campaignkit_recipients ({columns})",
            )
    async with SqliteLedger(path) as ledger:
        indexes = await sql(
            ledger,
            "SELECT name FROM sqlite_master WHERE type = 'index'"
            " AND tbl_name = 'campaignkit_recipients' AND name NOT LIKE 'sqlite_autoindex%'"
            " ORDER BY name",
        )
        assert indexes == [
            ("campaignkit_recipients_run_chunk",),
            ("campaignkit_recipients_unplanned",),
        ]
        settle = (
            "UPDATE campaignkit_recipients SET state = 'accepted' WHERE run = ?"
            " AND chunk IN (SELECT chunk FROM campaignkit_claims WHERE run = ? AND claim IN (?))"
            " AND claim IN (?)"
        )
        counted = "SELECT COUNT(DISTINCT r.phone)" + TAKEN.format(states="('accepted')")
        reported = "SELECT r.phone" + UNPLANNED.format(states="('rejected', 'ambiguous')")
        for statement, args, index in [
            (settle, ("r", "r", "c", "c"), "run_chunk"),
            (counted, (0.0,), "run_chunk"),
            (reported, ("r",), "unplanned"),
        ]:
            steps = [row[-1] for row in await sql(ledger, "EXPLAIN QUERY PLAN " + statement, *args)]
            assert any(f"campaignkit_recipients_{index}" in step for step in steps), steps
            assert not any(
                step.startswith(("SCAN r", "SCAN campaignkit_recipients")) for step in steps
            )


async def test_claims_of_a_schema_2_ledger_settle_their_recipients_once_opened(
    tmp_path: Path,
) -> None:
    """A ledger of schema 2 moved each recipient of a claim; one opened by
    this campaignkit (schema 3: a claim's recipients are held by it) settles
    such a claim's recipients all the same, and claims its other chunks."""
    path = tmp_path / "ledger.db"
    async with SqliteLedger(path) as ledger:
        await ledger.start_run(RUN, "poll")
        await ledger.plan(RUN, "old", people(3))
        await ledger.plan(RUN, "new", people(2, first=3, position=3))
        old = await claimed(ledger, "old")
    # As schema 2 left a claim in flight: its rows moved, its chunk naming none.
    with sqlite_file(path) as conn:
        conn.execute(
            "UPDATE campaignkit_recipients SET state = 'in_flight', claim = ? WHERE chunk = 'old'",
            (old.token,),
        )
        conn.execute("ALTER TABLE campaignkit_chunks DROP COLUMN claim")
        for column in ("launch_request_id", "updated", "positions"):
            conn.execute(f"ALTER TABLE campaignkit_claims DROP COLUMN {column}")
        conn.execute("UPDATE campaignkit_schema SET version = 2")
    async with SqliteLedger(path) as ledger:
        assert await sql(ledger, "SELECT version FROM campaignkit_schema") == [(SCHEMA_VERSION,)]
        assert (await ledger.counts(RUN))[IN_FLIGHT] == 3
        new = await claimed(ledger, "new")
        assert await ledger.claim(RUN, "old") is None
        await ledger.settle(RUN, old.token, ACCEPTED, launch_request_id="L-old")
        await ledger.settle(RUN, new.token, ACCEPTED, launch_request_id="L-new")
        assert set((await states(ledger)).values()) == {ACCEPTED}
        launches = await ledger.launch_phones(RUN, ["L-old", "L-new"])
        assert {launch: len(phones) for launch, phones in launches.items()} == {
            "L-old": 3,
            "L-new": 2,
        }
        report = await ledger.report(RUN)
        assert sorted((c.size, tuple(c.positions)) for c in report.accepted) == [
            (2, (3, 4)),
            (3, (0, 1, 2)),
        ]


@given(st.sets(st.integers(min_value=0, max_value=3000), max_size=300))
def test_a_claims_positions_are_kept_as_spans_and_read_back(taken: set[int]) -> None:
    positions = sorted(taken)
    text = spans(positions)
    assert positions_of(text) == positions
    # One span a run of consecutive positions, however long.
    runs = sum(1 for i, p in enumerate(positions) if i == 0 or positions[i - 1] != p - 1)
    assert len(text.split()) == runs


async def test_claims_of_a_schema_3_ledger_are_reported_with_their_positions(
    tmp_path: Path,
) -> None:
    """Schema 4 keeps a claim's positions in its row, for the report; a claim
    made by schema 3 has none there, and is reported from its recipients."""
    path = tmp_path / "ledger.db"
    async with SqliteLedger(path) as ledger:
        await ledger.start_run(RUN, "poll")
        # Positions apart, as a deduplicated input leaves them.
        await ledger.plan(
            RUN, "old", [Recipient(r.phone, 2 * r.position, r.user) for r in people(3)]
        )
        old = await claimed(ledger, "old")
    with sqlite_file(path) as conn:
        conn.execute("ALTER TABLE campaignkit_claims DROP COLUMN positions")
        conn.execute("UPDATE campaignkit_schema SET version = 3")
    async with SqliteLedger(path) as ledger:
        assert await sql(ledger, "SELECT version FROM campaignkit_schema") == [(SCHEMA_VERSION,)]
        await ledger.plan(RUN, "new", people(4, first=3, position=10))
        new = await claimed(ledger, "new")
        assert await sql(ledger, "SELECT positions FROM campaignkit_claims ORDER BY chunk") == [
            ("10-13",),
            (None,),
        ]
        for claim in (old, new):
            await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id=claim.chunk)
        report = await ledger.report(RUN)
        assert sorted(tuple(c.positions) for c in report.accepted) == [(0, 2, 4), (10, 11, 12, 13)]


async def test_postgres_new_recipients_met_by_a_twin_are_planned_again_not_moved(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan copies in the recipients it found new to the run; when a twin
    planned one of them meanwhile, the copy fails as a conflict and the plan
    runs again, keeping the twin's recipients where they are."""
    from campaignkit.ledger._sql_tx import SqlTx

    async with PostgresLedger(postgres_dsn) as ledger:
        await ledger.start_run(RUN, "poll")
        await ledger.plan(RUN, "twin", people(2))
        twin = await claimed(ledger, "twin")
        unseen = [True]
        chunks_free = SqlTx._chunks_free

        async def read_before_the_twin(self: SqlTx, *args: Any) -> list[str] | None:
            if unseen.pop() if unseen else False:
                return None  # as read before the twin's plan committed
            return await chunks_free(self, *args)

        monkeypatch.setattr(SqlTx, "_chunks_free", read_before_the_twin)
        held = await ledger.plan(RUN, "mine", people(3))
    assert not unseen  # the copy was tried first
    assert sorted(r.phone for r in held) == sorted(r.phone for r in twin.recipients)
    assert all(r.state == IN_FLIGHT for r in held)
