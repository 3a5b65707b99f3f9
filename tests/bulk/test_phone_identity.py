"""A person is one Phone end to end, against the sandbox over real HTTP and
in every ledger (memory, SQLite, PostgreSQL): the suppression list holds
whatever way a number is written, one person is sent once per run, and the
network's own forms of a line (Mexico's ``+52 1``) find their recipient."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from helpers.servers import serving

from campaignkit import CampaignClient, DeploymentStatus, User
from campaignkit.ledger import Ledger
from campaignkit.sandbox import Sandbox
from campaignkit.sandbox._outcomes import STATUSES
from campaignkit.webhooks import webhook_app

pytestmark = pytest.mark.timeout(60)


async def received(sb: Sandbox) -> Counter[str]:
    snapshot = await sb.snapshot(company=sb.company_id, launch="-")
    return Counter(snapshot["companies"][0]["phone_counts"])


async def test_numbers_on_the_list_are_not_sent_in_their_trunk_form(
    sb: Sandbox, client: CampaignClient, ledger: Ledger
) -> None:
    await ledger.suppress(["+44 7700 900123", "+61 412 345 678"], "opted out")
    users = [
        User(country_code="+44", cellphone="07700900123"),  # the UK's own way to write it
        User(country_code="+61", cellphone="0412 345 678"),  # and Australia's
        User(country_code="+057", cellphone="573001234567"),
    ]
    poll = (await client.list_polls())[0].id
    report = await client.send_bulk(poll, users, journal=ledger, run="r1")
    assert await received(sb) == {"+573001234567": 1}
    assert (report.counts["accepted"], report.counts["suppressed"]) == (1, 2)
    assert {s.phone for s in report.suppressed} == {"+447700900123", "+61412345678"}


async def test_one_person_written_three_ways_is_sent_once(
    sb: Sandbox, client: CampaignClient, ledger: Ledger
) -> None:
    users = [
        User(country_code="+44", cellphone=cellphone)
        for cellphone in ("7700900555", "07700900555", "077 0090 0555")
    ]
    poll = (await client.list_polls())[0].id
    report = await client.send_bulk(poll, users, journal=ledger, run="r1")
    assert (report.counts["accepted"], report.counts["duplicate"]) == (1, 2)
    # The service gets the national number, without the trunk 0.
    assert await received(sb) == {"+447700900555": 1}


async def test_an_opt_out_in_whatsapp_form_suppresses_a_plus_52_run(
    sb: Sandbox, client: CampaignClient, ledger: Ledger
) -> None:
    opting_out = f"55123499{STATUSES.index(DeploymentStatus.FAILURE_BY_OPTOUT_CONTACT):02d}"
    delivered = "5512340001"
    users = [User(country_code="+52", cellphone=c) for c in (opting_out, delivered)]
    poll = (await client.list_polls())[0].id
    async with serving(webhook_app(lambda event: None, ledger=ledger)) as url:
        await sb.set_webhook(urls={"opt_out": f"{url}/webhook"})
        report = await client.send_bulk(poll, users, journal=ledger, run="r1", follow=True)
        assert report.counts["accepted"] == 2
        for _ in range(200):
            if await ledger.suppression("+52" + opting_out) is not None:
                break
            await sb.set_clock(advance=5)
            await asyncio.sleep(0.02)
    # The sandbox, as the network, reports these mobiles as +52 1 ...
    assert report.accepted[0].ack is not None
    status = await client.get_campaign_status(report.accepted[0].ack.launch_request_id)
    assert {d.cellphone for d in status.deployments} == {"1" + opting_out, "1" + delivered}
    # ... and tracking found each recipient all the same.
    outcomes = {o.phone: o.status for o in await ledger.outcomes("r1")}
    assert outcomes == {
        "+52" + opting_out: DeploymentStatus.FAILURE_BY_OPTOUT_CONTACT,
        "+52" + delivered: DeploymentStatus.DELIVERED,
    }
    listed = await ledger.suppression("+52 1 " + opting_out)
    assert listed is not None
    assert listed.phone == "+52" + opting_out
    again = await client.send_bulk(poll, users, journal=ledger, run="r2")
    assert (again.counts["accepted"], again.counts["suppressed"]) == (1, 1)
    assert (await received(sb))["+52" + opting_out] == 1
