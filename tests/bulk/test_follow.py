"""Following a run on the sandbox: ``send_bulk(follow=True)`` and
``follow_run`` write each recipient's outcome, a follow resumes where it
stopped, a webhook app with ``ledger=`` records its events, and a follow-up
run resends to the chosen failures and no one else."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from helpers.servers import serving

from campaignkit import CampaignClient, DeploymentStatus, User, follow_run
from campaignkit.errors import LedgerError
from campaignkit.ledger import ACCEPTED, Ledger
from campaignkit.sandbox import Sandbox
from campaignkit.sandbox._outcomes import STATUSES
from campaignkit.webhooks import webhook_app

pytestmark = pytest.mark.timeout(60)

S = DeploymentStatus
UNABLE = S.FAILURE_BY_UNABLE_TO_CONTACT
OPTOUT = S.FAILURE_BY_OPTOUT_CONTACT


def phone_ending(n: int, status: DeploymentStatus | None = None) -> str:
    """A cellphone the sandbox delivers, or (with ``status``) fails with it."""
    return f"31{n:04d}99{STATUSES.index(status):02d}" if status else f"31{n:08d}"


def users(*cellphones: str) -> list[User]:
    return [
        User(cellphone=c, country_code="+57", user_session_keys={"name": f"n{c}"})
        for c in cellphones
    ]


EVERYONE = users(
    phone_ending(1),
    phone_ending(2),
    phone_ending(3),
    phone_ending(4, UNABLE),
    phone_ending(5, OPTOUT),
)


async def poll_of(client: CampaignClient) -> int:
    return (await client.list_polls())[0].id


async def received(sb: Sandbox) -> Counter[str]:
    snapshot = await sb.snapshot(company=sb.company_id, launch="-")
    return Counter(snapshot["companies"][0]["phone_counts"])


async def test_send_bulk_follow_writes_every_outcome(
    sb: Sandbox, client: CampaignClient, ledger: Ledger
) -> None:
    report = await client.send_bulk(
        await poll_of(client), EVERYONE, chunk_size=2, journal=ledger, run="r1", follow=True
    )
    assert report.funnel is not None
    assert (report.funnel.planned, report.funnel.accepted) == (5, 5)
    assert report.funnel.failed == {UNABLE.value: 1, OPTOUT.value: 1}
    outcomes = {o.phone: o for o in await ledger.outcomes("r1")}
    assert outcomes["+57" + phone_ending(4, UNABLE)].status is UNABLE
    # Settled: out of progress; sent (SUCCESS) or already confirmed delivered.
    assert {o.status for o in outcomes.values()} <= {S.SUCCESS, S.DELIVERED, UNABLE, OPTOUT}
    assert all(o.conversation_id and o.status_at for o in outcomes.values())
    assert (await ledger.report("r1")).funnel == report.funnel
    # Later, following again learns which SUCCESS became DELIVERED.
    await sb.set_clock(advance=600)
    funnel = await follow_run(client, ledger, "r1", poll_interval=0.05)
    assert funnel.steps == (
        ("planned", 5),
        ("accepted", 5),
        ("delivered", 3),
        ("read", 0),
        ("replied", 0),
    )
    assert len(await ledger.final_launches("r1")) == 3


async def test_send_bulk_follow_without_a_journal(client: CampaignClient) -> None:
    report = await client.send_bulk(await poll_of(client), EVERYONE, chunk_size=3, follow=True)
    assert report.funnel is not None
    assert (report.funnel.accepted, report.funnel.delivered) == (5, 3)


async def test_follow_run_tracks_only_launches_not_yet_settled(
    sb: Sandbox, client: CampaignClient, ledger: Ledger
) -> None:
    await client.send_bulk(await poll_of(client), EVERYONE, chunk_size=2, journal=ledger, run="r1")
    assert (await ledger.funnel("r1")).delivered == 0  # not followed
    await sb.set_clock(advance=600)  # every deployment final
    launches = {r.launch_request_id async for r in ledger.records("r1", [ACCEPTED])}
    first = sorted(launches)[0]
    # As an earlier follow left it, stopped after settling one launch.
    await ledger.record_statuses("r1", [], final=[first])
    funnel = await follow_run(client, ledger, "r1", poll_interval=0.05)
    followed = {o.launch_request_id for o in await ledger.outcomes("r1")}
    assert followed == launches - {first}
    assert await ledger.final_launches("r1") == launches
    assert funnel == await ledger.funnel("r1")
    # Every launch settled: nothing is tracked again (this client reaches nothing).
    async with CampaignClient(
        sb.api_key, campaign_url="http://127.0.0.1:9", base_url="http://127.0.0.1:9"
    ) as unreachable:
        again = await asyncio.wait_for(follow_run(unreachable, ledger, "r1", timeout=1), 5)
    assert again == funnel


async def test_follow_run_of_an_unknown_run(client: CampaignClient, ledger: Ledger) -> None:
    with pytest.raises(LedgerError, match="no run 'nope'"):
        await follow_run(client, ledger, "nope")


async def test_a_follow_up_run_resends_to_the_chosen_failures_only(
    sb: Sandbox, client: CampaignClient, ledger: Ledger
) -> None:
    poll = await poll_of(client)
    await client.send_bulk(poll, EVERYONE, chunk_size=2, journal=ledger, run="r1", follow=True)
    again = [user async for user in ledger.follow_up_users("r1", [UNABLE])]
    assert [u.cellphone for u in again] == [phone_ending(4, UNABLE)]
    assert again[0].user_session_keys == EVERYONE[3].user_session_keys
    report = await client.send_bulk(poll, again, journal=ledger, run="r1-follow-up", follow=True)
    assert report.counts["accepted"] == 1
    got = await received(sb)
    assert got["+57" + phone_ending(4, UNABLE)] == 2
    assert sorted(got.values()) == [1, 1, 1, 1, 2]


async def test_webhook_events_reach_the_ledgers_funnel(
    sb: Sandbox, client: CampaignClient, ledger: Ledger
) -> None:
    app = webhook_app(lambda event: None, ledger=ledger)
    async with serving(app) as url:
        kinds = ("delivered", "read", "response", "opt_out")
        await sb.set_webhook(urls={kind: f"{url}/webhook" for kind in kinds})
        report = await client.send_bulk(
            await poll_of(client), EVERYONE, journal=ledger, run="r1", follow=True
        )
        assert report.funnel is not None
        # Delivered and read events come as the sandbox's clock runs.
        for _ in range(200):
            funnel = await ledger.funnel("r1")
            if funnel.read == 3 and funnel.opted_out == 1:
                break
            await sb.set_clock(advance=5)
            await asyncio.sleep(0.02)
        await sb.reply(phone_ending(1), text="yes please")
        funnel = await ledger.funnel("r1")
    assert funnel.steps == (
        ("planned", 5),
        ("accepted", 5),
        ("delivered", 3),
        ("read", 3),
        ("replied", 1),
    )
    assert funnel.opted_out == 1
    replied = {o.phone: o for o in await ledger.outcomes("r1")}["+57" + phone_ending(1)]
    assert replied.answer == "yes please"
    assert replied.status is S.DELIVERED
    assert replied.delivered_at is not None
    assert replied.read_at is not None
