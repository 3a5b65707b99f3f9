"""A bulk send in its own process, for the kill -9 test of tests/bulk/test_sandbox.py.

``python bulk_child.py CAMPAIGN_URL API_KEY POLL_ID JOURNAL COUNT`` sends
``make_users(COUNT)`` with the journal and prints the report as JSON.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import orjson

from campaignkit import CampaignClient, User


def make_users(count: int) -> Iterator[User | dict[str, Any]]:
    """Users with invalid entries (every 97th) and repeated phones (i % 50 == 7)
    mixed in; every third one as a wire dict. Deterministic."""
    for i in range(count):
        j = i - 7 if i % 50 == 7 else i
        cellphone = f"55{j:08d}"
        if i % 97 == 0:
            cellphone = "12x"
        if i % 3 == 0:
            yield {
                "country_code": "+52",
                "cellphone": cellphone,
                "user_session_keys": [{"key": "n", "value": str(i)}],
            }
        else:
            yield User(cellphone=cellphone, country_code="+52", user_session_keys={"n": str(i)})


def expected_phones(count: int) -> set[str]:
    """The phones of the valid users of ``make_users(count)``."""
    phones = set()
    for item in make_users(count):
        cellphone = item["cellphone"] if isinstance(item, dict) else item.cellphone
        if cellphone.isdigit():
            phones.add("+52" + cellphone)
    return phones


async def main(campaign_url: str, key: str, poll_id: str, journal: str, count: int) -> None:
    async with CampaignClient(
        key, base_url=campaign_url, campaign_url=campaign_url, agent_url=campaign_url
    ) as client:
        report = await client.send_bulk(
            poll_id, make_users(count), chunk_size=500, concurrency=2, journal=journal
        )
    out = {
        "counts": report.counts,
        "total": report.total,
        "ambiguous": sorted(u.phone for u in report.users_for("ambiguous")),
        "rejected": sorted(u.phone for u in report.users_for("rejected")),
        "resumed_accepted": sum(1 for chunk in report.accepted if chunk.resumed),
        "resumed_ambiguous": sum(1 for chunk in report.ambiguous if chunk.resumed),
    }
    sys.stdout.write(orjson.dumps(out).decode())


if __name__ == "__main__":
    url, key, poll, journal, count = sys.argv[1:6]
    asyncio.run(main(url, key, poll, journal, int(count)))
