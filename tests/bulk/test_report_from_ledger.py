"""send_bulk's report is its ledger's (``ledger.report(run)``), over every
ledger: the same chunks, positions, acks, error classes, skipped and
suppressed inputs; only what this call did itself is marked so (not
``resumed``, with the error it met)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.exchange import Reply, ScriptedExchange
from helpers.ledgers import CONFORMING, NewLedger, ledger_factory

from campaignkit import BulkReport, CampaignClient, User
from campaignkit.errors import AmbiguousSendError, BadRequestError

pytestmark = pytest.mark.timeout(60)

KEY = "sk_tst_Q9vX2pL7mZ4rT8wK"
SEND = re.compile(r"^http://campaign\.test/v2/send-campaign/7$")


@pytest.fixture(params=CONFORMING)
def any_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> NewLedger:
    return ledger_factory(request, tmp_path)


def respond(request: Any) -> Reply:
    users = orjson.loads(request.body)["users"]
    first = users[0]["cellphone"]
    if first == "3000000010":
        return Reply(status=500, payload={"detail": "boom"})
    if first == "3000000020":
        return Reply(status=400, payload={"detail": "users[0].cellphone is not reachable"})
    launch = f"lr-{first}"
    ack = {"message": "queued", "id": "7", "batch_id": "b", "launch_request_id": launch}
    return Reply(status=202, payload={**ack, "status_url": f"/v2/send-campaign/{launch}"})


def inputs() -> list[Any]:
    users: list[Any] = [User(cellphone=f"30000000{n:02d}", country_code="+57") for n in range(30)]
    users.insert(3, {"cellphone": "1", "country_code": "57"})  # invalid
    users.insert(7, User(cellphone="3000000001", country_code="+57"))  # a duplicate
    users.insert(12, "not a user")  # invalid
    return users


def view(report: BulkReport) -> dict[str, Any]:
    """What a report says, but who sent each chunk."""
    chunks = report.accepted + report.rejected + report.ambiguous + report.deferred
    return {
        "counts": report.counts,
        "total": report.total,
        "chunks": [
            (c.chunk_id, c.outcome, c.size, list(c.positions), c.ack, type(c.error)) for c in chunks
        ],
        "invalid": [(i.position, i.reason) for i in report.invalid],
        "duplicates": [(d.position, d.phone) for d in report.duplicates],
        "suppressed": [(s.position, s.phone, s.reason) for s in report.suppressed],
        "users": [report.users_for(o) for o in ("rejected", "ambiguous", "suppressed")],
    }


async def test_the_report_is_the_ledgers(any_ledger: NewLedger) -> None:
    exchange = ScriptedExchange()
    exchange.post(SEND, callback=respond, repeat=True)
    async with (
        CampaignClient(KEY, campaign_url="http://campaign.test", exchange=exchange) as client,
        any_ledger() as ledger,
    ):
        await ledger.suppress(["+573000000004", "+573000000027"], "opted out")
        report = await client.send_bulk(7, inputs(), chunk_size=5, journal=ledger, run="r")
        read = await ledger.report("r")
    assert view(report) == view(read)
    assert report.counts == {
        "accepted": 18,
        "rejected": 5,  # 20 to 24: the 400 named one user of their request
        "ambiguous": 5,  # 10 to 14: the 500
        "deferred": 0,
        "invalid": 2,
        "duplicate": 1,
        "suppressed": 2,
    }
    assert report.total == read.total == 33
    # What this call sent: not resumed, with the errors it met.
    chunks = report.accepted + report.rejected + report.ambiguous
    assert not any(chunk.resumed for chunk in chunks)
    assert isinstance(report.ambiguous[0].error, AmbiguousSendError)
    assert isinstance(report.rejected[0].error, BadRequestError)
    assert "users[0].cellphone" in str(report.rejected[0].error)
