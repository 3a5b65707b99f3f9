"""Twin producers: two ``send_bulk`` calls of one run on one ledger at once
(each with a ledger object of its own, as two processes would have), against
the sandbox. Nobody receives twice, and neither report calls ambiguous the
users the other had in flight and then settled."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from helpers.bulk_child import expected_phones, make_users
from helpers.ledgers import NewLedger

from campaignkit import User
from campaignkit.ledger import ACCEPTED, Claim, MemoryLedger, Recipient
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)

COUNT = 2000


async def test_twin_producers_report_what_the_other_sent(
    sb: Sandbox, new_ledger: NewLedger
) -> None:
    # Each request is processed, then answered 50 ms later: the twin meets
    # its other half's recipients in flight.
    await sb.set_faults(
        {"kind": "latency", "seconds": 0.05, "route": "send_campaign", "when": "after"}
    )
    async with new_ledger() as first, new_ledger() as second:
        async with sb.client() as one, sb.client() as two:
            poll = (await one.list_polls())[0].id
            reports = await asyncio.gather(
                *(
                    client.send_bulk(
                        poll, make_users(COUNT), chunk_size=100, journal=ledger, run="twins"
                    )
                    for client, ledger in ((one, first), (two, second))
                )
            )
        counts = await first.counts("twins")
    received = (await sb.snapshot())["companies"][0]["phone_counts"]
    valid = len(expected_phones(COUNT))
    assert len(received) == valid
    assert max(received.values()) == 1
    assert counts["accepted"] == valid
    for report in reports:
        assert report.counts["ambiguous"] == 0, report.counts
        assert report.counts["accepted"] == valid
        # Each accepted chunk names the request (claim) that sent it, once.
        assert sum(chunk.size for chunk in report.accepted) == valid
    # Between them, the twins sent everyone, each user once.
    sent_here = [sum(c.size for c in r.accepted if not c.resumed) for r in reports]
    assert sum(sent_here) == valid, [
        [(c.index, c.size, c.resumed, (c.chunk_id or "")[:6]) for c in r.accepted] for r in reports
    ]


class TwinSendsTheFirstUser(MemoryLedger):
    """Between a sender's plan of its first chunk and its claim, a twin of
    the run plans its first user again, claims and sends it."""

    raced = False

    async def claim(self, run: str, chunk: str, *, owner: str = "") -> Claim | None:
        if not self.raced:
            self.raced = True
            wire = orjson.dumps({"country_code": "+57", "cellphone": "3100000000"}).decode()
            await self.plan(run, "twin", [Recipient("+573100000000", 0, wire)])
            taken = await super().claim(run, "twin", owner="twin")
            assert taken is not None
            await self.settle(run, taken.token, ACCEPTED, launch_request_id="twin-launch")
        return await super().claim(run, chunk, owner=owner)


async def test_a_user_written_with_separators_that_a_twin_sent_is_reported_sent(
    sb: Sandbox,
) -> None:
    # The report looks the twin's user up by the phone the ledger keys it by
    # (its cellphone normalised), not as written.
    users = [User(cellphone=f"310 000 000{n}", country_code="+57") for n in range(3)]
    async with sb.client() as client, TwinSendsTheFirstUser() as ledger:
        poll = (await client.list_polls())[0].id
        report = await client.send_bulk(poll, users, journal=ledger)
    assert report.counts["accepted"] == 3
    assert report.counts["ambiguous"] == 0
    assert [(c.size, c.resumed) for c in report.accepted] == [(1, True), (2, False)]
