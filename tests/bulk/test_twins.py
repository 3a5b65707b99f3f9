"""Twin producers: two ``send_bulk`` calls of one run on one ledger at once
(each with a ledger object of its own, as two processes would have), against
the sandbox. Nobody receives twice, and neither report calls ambiguous the
users the other had in flight and then settled."""

from __future__ import annotations

import asyncio

import pytest
from helpers.bulk_child import expected_phones, make_users
from helpers.ledgers import NewLedger

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
