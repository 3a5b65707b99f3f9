"""send_bulk honours the ledger's suppression list, against the sandbox over
real HTTP: a suppressed number is never messaged, unless a run is told to
ignore the list; a rerun sends a number taken off it."""

from __future__ import annotations

from collections import Counter

import orjson
import pytest
from helpers.ledgers import NewLedger

from campaignkit import ProgressUpdate, User
from campaignkit.ledger import SUPPRESSED, Claim, Ledger, MemoryLedger, Recipient
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)


def people(count: int) -> list[User]:
    # Written with separators: the list matches them as the ledger keys them.
    return [User(cellphone=f"310 {n:07d}", country_code="+57") for n in range(count)]


async def received(sb: Sandbox) -> Counter[str]:
    snapshot = await sb.snapshot(company=sb.company_id, launch="-")
    return Counter(snapshot["companies"][0]["phone_counts"])


async def test_a_second_run_does_not_message_suppressed_numbers(
    sb: Sandbox, new_ledger: NewLedger
) -> None:
    everyone = {f"+573100{n:06d}" for n in range(10)}
    async with sb.client() as client, new_ledger() as ledger:
        poll = (await client.list_polls())[0].id
        first = await client.send_bulk(poll, people(8), chunk_size=3, journal=ledger, run="one")
        assert first.counts["accepted"] == 8
        assert (
            await ledger.suppress(["+57 310 0000001", "+573100000005"], "opted out by phone") == 2
        )
        await ledger.suppress(people(10)[9:], "FAILURE_BY_BLOCKED_CONTACT")
        updates: list[ProgressUpdate] = []
        second = await client.send_bulk(
            poll, people(10), chunk_size=3, journal=ledger, run="two", on_progress=updates.append
        )
        expected = {phone: 2 for phone in everyone if phone != "+573100000009"}
        expected.update(dict.fromkeys(["+573100000001", "+573100000005", "+573100000008"], 1))
        assert await received(sb) == expected
        assert second.counts == {
            "accepted": 7,
            "rejected": 0,
            "ambiguous": 0,
            "deferred": 0,
            "invalid": 0,
            "duplicate": 0,
            "suppressed": 3,
        }
        assert second.total == 10
        assert [(s.position, s.phone, s.reason) for s in second.suppressed] == [
            (1, "+573100000001", "opted out by phone"),
            (5, "+573100000005", "opted out by phone"),
            (9, "+573100000009", "FAILURE_BY_BLOCKED_CONTACT"),
        ]
        # The users as given, for a deliberate send.
        assert [u.cellphone for u in second.users_for("suppressed")] == [
            "310 0000001",
            "310 0000005",
            "310 0000009",
        ]
        assert updates[-1].states["suppressed"] == 3
        assert updates[-1].skipped == 3  # suppressed: settled, not sent, not failed
        # The ledger's report of the run says the same.
        read = await ledger.report("two")
        assert read.counts == second.counts
        assert read.suppressed == second.suppressed

        # Taken off the list, a number is sent by a rerun of the run.
        await ledger.unsuppress(["+573100000005"])
        again = await client.send_bulk(poll, people(10), chunk_size=4, journal=ledger, run="two")
        assert again.counts["suppressed"] == 2
        assert again.counts["accepted"] == 8
        assert (await received(sb))["+573100000005"] == 2

        # A run told to ignore the list sends everyone.
        ignoring = await client.send_bulk(
            poll, people(10), journal=ledger, run="three", ignore_suppression=True
        )
        assert ignoring.counts["accepted"] == 10
        assert ignoring.counts["suppressed"] == 0
    got = await received(sb)
    assert got["+573100000001"] == 2
    assert got["+573100000009"] == 1


async def test_a_memory_ledger_given_as_journal_honours_its_list(sb: Sandbox) -> None:
    ledger = MemoryLedger()
    async with sb.client() as client, ledger:
        poll = (await client.list_polls())[0].id
        await ledger.suppress(["+573100000000", "+573100000002"], "opt_out")
        report = await client.send_bulk(poll, people(4), chunk_size=2, journal=ledger)
        assert report.counts["suppressed"] == 2
        assert report.counts["accepted"] == 2
        states = {r.phone: r.state async for r in ledger.records(f"poll-{poll}")}
    assert states["+573100000000"] == states["+573100000002"] == SUPPRESSED
    assert set(await received(sb)) == {"+573100000001", "+573100000003"}


async def test_an_all_suppressed_input_sends_nothing(sb: Sandbox) -> None:
    async with sb.client() as client:
        poll = (await client.list_polls())[0].id
        ledger: Ledger = MemoryLedger()
        async with ledger:
            await ledger.suppress(people(3))
            report = await client.send_bulk(poll, people(3), journal=ledger)
    assert report.counts["suppressed"] == 3
    assert report.total == 3
    assert report.complete
    assert await received(sb) == Counter()


class ListedBetweenPlanAndClaim(MemoryLedger):
    """Between a sender's plan of its first chunk and its claim, the first
    user's number is listed and another sender of the run (a twin) plans it
    again: the twin files it suppressed, and the claim does not take it."""

    raced = False

    async def claim(self, run: str, chunk: str, *, owner: str = "") -> Claim | None:
        if not self.raced:
            self.raced = True
            await self.suppress(["+573100000000"], "opt_out")
            wire = orjson.dumps({"country_code": "+57", "cellphone": "3100000000"}).decode()
            await self.plan(run, "twin", [Recipient("+573100000000", 0, wire)])
        return await super().claim(run, chunk, owner=owner)


async def test_a_user_a_twin_suppressed_mid_chunk_is_reported_suppressed(sb: Sandbox) -> None:
    ledger = ListedBetweenPlanAndClaim()
    async with sb.client() as client, ledger:
        poll = (await client.list_polls())[0].id
        report = await client.send_bulk(poll, people(3), journal=ledger)
    assert report.counts["suppressed"] == 1
    assert report.counts["accepted"] == 2
    assert report.counts["ambiguous"] == 0
    assert [(s.position, s.phone, s.reason) for s in report.suppressed] == [
        (0, "+573100000000", "opt_out")
    ]
    assert set(await received(sb)) == {"+573100000001", "+573100000002"}


class ListedBeforeTheClaim(MemoryLedger):
    """The first user's number is listed (an opt-out arrives) after its chunk
    was planned, before it is claimed."""

    async def claim(self, run: str, chunk: str, *, owner: str = "") -> Claim | None:
        await self.suppress(["+573100000000"], "opt_out")
        return await super().claim(run, chunk, owner=owner)


async def test_a_number_listed_while_its_chunk_waits_is_not_sent(sb: Sandbox) -> None:
    async with sb.client() as client, ListedBeforeTheClaim() as ledger:
        poll = (await client.list_polls())[0].id
        report = await client.send_bulk(poll, people(3), journal=ledger, ignore_suppression=True)
    assert (report.counts["accepted"], report.counts["suppressed"]) == (2, 1)
    assert [(s.position, s.phone, s.reason) for s in report.suppressed] == [
        (0, "+573100000000", "opt_out")
    ]
    assert set(await received(sb)) == {"+573100000001", "+573100000002"}
