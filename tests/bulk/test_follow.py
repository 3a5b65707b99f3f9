"""Following a run on the sandbox: ``send_bulk(follow=True)`` and
``follow_run`` write each recipient's outcome, a follow resumes where it
stopped, a webhook app with ``ledger=`` records its events, and a follow-up
run resends to the chosen failures and no one else."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from helpers.phones import mobiles
from helpers.servers import serving
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit import CampaignAck, CampaignClient, DeploymentStatus, Phone, User, follow_run
from campaignkit._input.phones import read_phone
from campaignkit._wire.decode import StatusEntry
from campaignkit.bulk._launch_phones import LaunchPhones
from campaignkit.bulk._outcome_writer import LaunchOutcomes
from campaignkit.errors import LedgerError, NotFoundError, ValidationError
from campaignkit.errors import TimeoutError as CampaignKitTimeoutError
from campaignkit.ledger import (
    ACCEPTED,
    Ledger,
    LedgerNotFound,
    MemoryLedger,
    Recipient,
    StatusRow,
)
from campaignkit.ledger._outcomes import failure_statuses
from campaignkit.sandbox import Sandbox
from campaignkit.sandbox._outcomes import STATUSES
from campaignkit.status import KNOWN_WIRE_STATUSES
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
    await sb.set_clock(advance=600)  # every deployment final
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
    launches = {
        r.launch_request_id async for r in ledger.records("r1", [ACCEPTED]) if r.launch_request_id
    }
    first = sorted(launches)[0]
    # As an earlier follow left it, stopped after settling one launch.
    await ledger.record_statuses("r1", [], final=[first])
    await sb.set_clock(advance=600)  # every deployment final
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


async def test_follow_run_of_a_missing_ledger_creates_none(
    client: CampaignClient, tmp_path: Path
) -> None:
    """Following reads a run: a mistyped path is refused, not made a new ledger."""
    missing = tmp_path / "mistyped.db"
    with pytest.raises(LedgerNotFound):
        await follow_run(client, missing, "spring")
    assert not missing.exists()


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
        # The send's follow may have ended while a launch was at SUCCESS
        # (settled, not final: seen on a loaded machine); following again
        # polls it once more, as it is DELIVERED by now.
        await follow_run(client, ledger, "r1", poll_interval=0.05)
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


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"run": ""}, "run"),
        ({"poll_interval": -1}, "poll_interval"),
        ({"timeout": 0}, "timeout"),
        ({"follow_timeout": 0}, "follow_timeout"),
        ({"follow_timeout": "60"}, "follow_timeout"),
        ({"follow_timeout": True}, "follow_timeout"),
    ],
)
async def test_follow_run_options_are_checked_before_anything(
    client: CampaignClient, options: dict[str, Any], field: str
) -> None:
    arguments = {"run": "r1", **options}
    with pytest.raises(ValidationError) as raised:
        # No ledger is opened: the journal names a directory that does not exist.
        await follow_run(client, "/nonexistent/dir/run.db", **arguments)
    assert [path for path, _ in raised.value.problems] == [field]


async def test_send_bulk_follow_must_be_a_bool(client: CampaignClient) -> None:
    with pytest.raises(ValidationError, match="follow"):
        await client.send_bulk(1001, EVERYONE, follow="yes")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="follow_timeout"):
        await client.send_bulk(1001, EVERYONE, follow=True, follow_timeout=-1)


def network_forms(phone: Phone) -> list[str]:
    """The cellphones a deployment may name ``phone`` by: as sent, with its
    country code, with spaces, and in WhatsApp's Mexican form."""
    cellphone = phone.cellphone
    forms = [cellphone, phone.country_code[1:] + cellphone, f"{cellphone[:3]} {cellphone[3:]}"]
    return forms + (["1" + cellphone] if phone.country_code == "+52" else [])


@settings(max_examples=200, deadline=None)
@given(st.lists(mobiles(), min_size=1, max_size=30) | st.lists(mobiles(("CO",)), min_size=1))
def test_a_deployment_finds_its_recipient_or_no_one(people: list[tuple[str, str, str]]) -> None:
    phones = list(dict.fromkeys(Phone.of(code, national) for _, code, national in people))
    found = LaunchPhones(phone.key for phone in phones)
    for phone in phones:
        for cellphone in network_forms(phone):
            # Never someone else; the one recipient it can be, when no other can.
            others = [
                p for p in phones if p != phone and read_phone(p.country_code, cellphone) == p
            ]
            assert found.phone_of(cellphone) == (None if others else phone.key)
    # A launch's, at once: each recipient by the cellphone it was sent.
    sent = [phone.cellphone for phone in phones]
    assert found.phones_of(sent) == [found.phone_of(cellphone) for cellphone in sent]


@given(st.text(max_size=40))
def test_follow_up_statuses_other_than_failures_are_refused(name: str) -> None:
    status = KNOWN_WIRE_STATUSES.get(name)
    if status is not None and status.is_failure:
        assert failure_statuses([name]) == {status}
    else:
        with pytest.raises(ValidationError, match="statuses"):
            failure_statuses([name])


async def test_a_launch_the_service_does_not_know_does_not_stop_the_others(
    client: CampaignClient, ledger: Ledger
) -> None:
    await client.send_bulk(await poll_of(client), EVERYONE, chunk_size=2, journal=ledger, run="r1")
    # A launch of the run the service does not know (forgotten by it, say).
    ghost = CampaignAck("ok", "x", "x", "ghost-launch", "/v2/send-campaign/ghost-launch")
    await ledger.plan("r1", "ghost", [Recipient("+573119999999", 99, "{}")])
    claim = await ledger.claim("r1", "ghost")
    assert claim is not None
    ack = orjson.dumps(attrs.asdict(ghost)).decode()
    await ledger.settle("r1", claim.token, ACCEPTED, launch_request_id="ghost-launch", ack=ack)
    with pytest.raises(NotFoundError) as raised:
        await follow_run(client, ledger, "r1", poll_interval=0.05, not_found_grace=0.2)
    assert "1 of 4 launches" in "".join(raised.value.__notes__)
    # The others were followed all the same.
    assert len({o.launch_request_id for o in await ledger.outcomes("r1")}) == 3


async def test_a_cancelled_follow_keeps_what_it_read_and_resumes(
    sb: Sandbox, client: CampaignClient, ledger: Ledger
) -> None:
    stuck = users(phone_ending(6, S.RECEIVED))  # RECEIVED for good: never settles
    poll = await poll_of(client)
    three = EVERYONE[:3]
    # One request at a time: the launches in input order, the stuck one last.
    await client.send_bulk(
        poll, three + stuck, chunk_size=1, concurrency=1, journal=ledger, run="r1"
    )
    await sb.set_clock(advance=600)  # the others final
    # One launch at a time, in the order sent.
    following = asyncio.create_task(
        follow_run(client, ledger, "r1", concurrency=1, poll_interval=0.05)
    )
    for _ in range(2000):  # until the three others are final
        if len(await ledger.final_launches("r1")) == 3:
            break
        await asyncio.sleep(0.01)
    assert len(await ledger.final_launches("r1")) == 3
    await asyncio.sleep(0.2)  # the stuck launch is being followed
    following.cancel()
    with pytest.raises(asyncio.CancelledError):
        await following
    # What it read of the stuck launch was written, not marked final.
    outcomes = {o.phone: o for o in await ledger.outcomes("r1")}
    assert outcomes["+57" + stuck[0].cellphone].status is S.RECEIVED
    assert len(await ledger.final_launches("r1")) == 3
    # Following again tracks the stuck launch only (and gives up on it here).
    with pytest.raises(CampaignKitTimeoutError) as raised:
        await follow_run(client, ledger, "r1", poll_interval=0.05, timeout=0.3)
    assert "1 of 1 launch" in "".join(raised.value.__notes__)


async def test_send_bulk_follow_returns_its_report_when_a_launch_cannot_be_followed(
    sb: Sandbox, client: CampaignClient, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    # The first status read answers JSON of the wrong shape: that launch fails.
    await sb.set_faults({"kind": "wrong_type", "route": "campaign_status", "count": 1})
    report = await client.send_bulk(
        await poll_of(client), EVERYONE, chunk_size=2, journal=ledger, run="r1", follow=True
    )
    assert report.counts["accepted"] == 5
    assert report.funnel is not None
    assert report.funnel.accepted == 5
    assert len({o.launch_request_id for o in await ledger.outcomes("r1")}) == 2
    assert "1 of 3 launches of run 'r1' could not be followed" in caplog.text


async def test_followed_opt_outs_blocks_and_invalid_numbers_are_never_sent_again(
    sb: Sandbox, client: CampaignClient, ledger: Ledger
) -> None:
    """The sandbox's magic numbers fail with each status that lists a number;
    following the run lists them, and the next run sends only the others."""
    listing = (OPTOUT, S.FAILURE_BY_BLOCKED_CONTACT, S.INVALID_PHONE)
    people = users(
        phone_ending(1),
        phone_ending(2, UNABLE),
        *(phone_ending(n, s) for n, s in enumerate(listing, 3)),
    )
    poll = await poll_of(client)
    await client.send_bulk(poll, people, chunk_size=2, journal=ledger, run="r1", follow=True)
    listed = {entry.phone: entry.reason async for entry in ledger.suppressions()}
    assert listed == {"+57" + phone_ending(n, s): s.value for n, s in enumerate(listing, 3)}
    again = await client.send_bulk(poll, people, chunk_size=2, journal=ledger, run="r2")
    assert (again.counts["accepted"], again.counts["suppressed"]) == (2, 3)
    assert {s.phone: s.reason for s in again.suppressed} == listed
    got = await received(sb)
    assert {phone: got[phone] for phone in listed} == dict.fromkeys(listed, 1)
    assert max(got.values()) == 2  # the two others, sent in both runs


async def sent_with_one_launch_stuck(client: CampaignClient, ledger: Ledger, sb: Sandbox) -> str:
    """Run r1: three launches final, and one whose deployment stays RECEIVED
    for good (never settles); its phone."""
    stuck = users(phone_ending(6, S.RECEIVED))
    await client.send_bulk(
        await poll_of(client), EVERYONE[:3] + stuck, chunk_size=1, journal=ledger, run="r1"
    )
    await sb.set_clock(advance=600)  # the others final
    return "+57" + stuck[0].cellphone


async def test_follow_run_stops_at_its_follow_timeout_keeping_what_it_read(
    sb: Sandbox, client: CampaignClient, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = await sent_with_one_launch_stuck(client, ledger, sb)
    started = time.monotonic()
    funnel = await asyncio.wait_for(
        follow_run(client, ledger, "r1", poll_interval=0.05, follow_timeout=0.5), 10
    )
    assert 0.5 <= time.monotonic() - started < 5
    assert funnel == await ledger.funnel("r1")
    assert funnel.delivered == 3
    # The stuck launch's status read so far is written, the launch not marked final.
    outcomes = {o.phone: o for o in await ledger.outcomes("r1")}
    assert outcomes[stuck].status is S.RECEIVED
    assert len(await ledger.final_launches("r1")) == 3
    assert "with 1 of 4 launches of run 'r1' not yet settled" in caplog.text
    caplog.clear()
    # Following again resumes: the stuck launch only.
    await follow_run(client, ledger, "r1", poll_interval=0.05, follow_timeout=0.3)
    assert "with 1 of 1 launch of run 'r1' not yet settled" in caplog.text


async def test_send_bulk_follow_timeout_returns_the_report_in_time(
    sb: Sandbox, client: CampaignClient, ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = users(phone_ending(6, S.RECEIVED))
    started = time.monotonic()
    report = await asyncio.wait_for(
        client.send_bulk(
            await poll_of(client),
            EVERYONE[:2] + stuck,
            chunk_size=1,
            journal=ledger,
            run="r1",
            follow=True,
            follow_timeout=1.0,
        ),
        15,
    )
    assert time.monotonic() - started < 10
    assert report.funnel is not None
    assert report.funnel.accepted == 3
    assert "launches of run 'r1' not yet settled" in caplog.text
    # A later follow resumes with the launches not yet final.
    await sb.set_clock(advance=600)
    funnel = await follow_run(client, ledger, "r1", poll_interval=0.05, follow_timeout=2)
    assert funnel.delivered == 2
    outcomes = {o.phone: o.status for o in await ledger.outcomes("r1")}
    assert outcomes["+57" + stuck[0].cellphone] is S.RECEIVED
    assert len(await ledger.final_launches("r1")) == 2


async def test_a_launchs_latest_statuses_are_written_as_a_ledger_keeps_them() -> None:
    written: list[tuple[list[StatusRow], list[str]]] = []

    class Writer:
        async def write(self, rows: Sequence[StatusRow], final: Sequence[str]) -> None:
            written.append((list(rows), list(final)))

    writer: Any = Writer()
    outcomes = LaunchOutcomes(writer, "L1", ["+573001112222", "+573003334444"])
    outcomes.add(
        [
            StatusEntry("c1", None, "3001112222", status="RECEIVED"),
            StatusEntry("", None, "3003334444", status="PUSH_NOTIFATION"),  # the misspelling
            StatusEntry("c9", None, "3009999999", status="SUCCESS"),  # nobody's
        ],
        10.0,
    )
    outcomes.add([StatusEntry("c1", None, "3001112222", status="SUCCESS")], 11.0)
    await outcomes.write(final=True)
    assert written == [
        (
            [
                ("+573001112222", "L1", "c1", "SUCCESS", 11.0),
                ("+573003334444", "L1", None, "PUSH_NOTIFICATION", 10.0),
            ],
            ["L1"],
        )
    ]
    assert outcomes.unmatched == 1
    assert outcomes.latest == {}


class _FullLedger(MemoryLedger):
    """A ledger whose outcomes can no longer be written."""

    async def record_statuses(
        self, run: str, rows: Sequence[StatusRow], *, final: Sequence[str] = ()
    ) -> None:
        raise LedgerError("the disk is full")


async def test_a_ledger_that_fails_to_write_raises_its_error(client: CampaignClient) -> None:
    """Not an ExceptionGroup of the launches' tasks: the error callers catch."""
    poll = await poll_of(client)
    async with _FullLedger() as ledger:
        report = await client.send_bulk(poll, EVERYONE, chunk_size=2, journal=ledger, run="r1")
        assert report.counts["accepted"] == 5
        with pytest.raises(LedgerError, match="the disk is full"):
            await follow_run(client, ledger, "r1", poll_interval=0.05)
        with pytest.raises(LedgerError, match="the disk is full"):
            await client.send_bulk(poll, EVERYONE, journal=ledger, run="r2", follow=True)


class _SlowLedger(MemoryLedger):
    """A ledger whose outcomes take a while to write."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()

    async def record_statuses(
        self, run: str, rows: Sequence[StatusRow], *, final: Sequence[str] = ()
    ) -> None:
        self.writing.set()
        await asyncio.sleep(0.2)
        await super().record_statuses(run, rows, final=final)


async def test_a_follow_cancelled_while_writing_returns_once_written(
    sb: Sandbox, client: CampaignClient
) -> None:
    async with _SlowLedger() as ledger:
        await client.send_bulk(await poll_of(client), EVERYONE[:1], journal=ledger, run="r1")
        await sb.set_clock(advance=600)  # final
        following = asyncio.create_task(follow_run(client, ledger, "r1", poll_interval=0.05))
        await asyncio.wait_for(ledger.writing.wait(), 10)
        following.cancel()
        with pytest.raises(asyncio.CancelledError):
            await following
        # Written before the cancellation went on (not left to finish behind it).
        assert [o.status for o in await ledger.outcomes("r1")] == [S.DELIVERED]
