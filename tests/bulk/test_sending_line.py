"""Protecting the sending line, end to end against the sandbox: what the
service receives under a send window, a daily limit and sending lines."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import orjson
import pytest

from campaignkit import CampaignClient, SendWindow, User, ValidationError, deployment_squad
from campaignkit._report import DAILY_LIMIT, ZONE_UNKNOWN, deferral_reason
from campaignkit.bulk import SendRules, users_from_csv
from campaignkit.bulk._windows import NoOpening, deployment_eta, zone_names_of_phone
from campaignkit.errors import LedgerError
from campaignkit.ledger import DEFERRED, MemoryLedger, Recipient, SqliteLedger
from campaignkit.sandbox import Sandbox
from campaignkit.workers import send_chunk

pytestmark = pytest.mark.timeout(60)


def people(numbers: range, **keys: str) -> list[User]:
    return [
        User(cellphone=f"31{n:08d}", country_code="+57", user_session_keys=keys) for n in numbers
    ]


async def received(sb: Sandbox) -> list[dict[str, Any]]:
    """Every user the default company's sends carried, in order."""
    snapshot = await sb.snapshot()
    return [user for launch in snapshot["companies"][0]["launches"] for user in launch["users"]]


async def poll_of(client: CampaignClient) -> int:
    return (await client.list_polls())[0].id


def closed_now(zone: ZoneInfo) -> SendWindow:
    """A window closed at this moment in ``zone``."""
    hour = datetime.now(UTC).astimezone(zone).hour
    return SendWindow(time(13), time(23)) if hour < 12 else SendWindow(time(1), time(11))


def open_now(zone: ZoneInfo) -> SendWindow:
    """A window open at this moment in ``zone``: the half of the day it is in."""
    hour = datetime.now(UTC).astimezone(zone).hour
    return SendWindow(time(0), time(12)) if hour < 12 else SendWindow(time(12), time.max)


async def test_outside_the_window_requests_carry_the_next_opening(
    sb: Sandbox, client: CampaignClient
) -> None:
    bogota, tokyo = ZoneInfo("America/Bogota"), ZoneInfo("Asia/Tokyo")
    window = closed_now(bogota)
    users = people(range(3))
    users.append(
        User(cellphone="3100000010", country_code="+57", user_session_keys={"tz": "Asia/Tokyo"})
    )
    before = datetime.now(UTC)
    report = await client.send_bulk(await poll_of(client), users, send_window=window)
    after = datetime.now(UTC)
    assert report.counts["accepted"] == 4
    got = {user["cellphone"]: user for user in await received(sb)}
    for n in range(3):
        eta = got[f"31{n:08d}"]["deployment_eta"]
        assert eta in {deployment_eta(window, (bogota,), at, None) for at in (before, after)}
        assert eta is not None
        assert window.contains(datetime.fromtimestamp(eta, UTC).astimezone(bogota))
    # The user's own zone: the window in Tokyo, where it may be open.
    tokyo_eta = got["3100000010"]["deployment_eta"]
    assert tokyo_eta in {deployment_eta(window, (tokyo,), at, None) for at in (before, after)}


async def test_inside_the_window_no_eta_is_added_and_tz_for_decides_the_zone(
    sb: Sandbox, client: CampaignClient
) -> None:
    users = people(range(2))
    report = await client.send_bulk(
        await poll_of(client),
        users,
        send_window=open_now(ZoneInfo("America/Bogota")),
        tz_for=lambda user: "America/Bogota" if user.cellphone.endswith("0") else None,
    )
    assert report.counts["accepted"] == 2
    got = await received(sb)
    assert [user["deployment_eta"] for user in got] == [None, None]
    assert {"key": "tz", "value": "America/Bogota"} in got[0]["user_session_keys"]


async def test_a_bad_time_zone_is_an_invalid_user_and_bad_options_raise(
    sb: Sandbox, client: CampaignClient
) -> None:
    users = [*people(range(1)), *people(range(1, 2), tz="Mars/Olympus")]
    report = await client.send_bulk(
        await poll_of(client), users, send_window=SendWindow("09:00", "20:00")
    )
    assert report.counts["accepted"] == 1
    assert "Mars/Olympus" in report.invalid[0].reason
    with pytest.raises(ValidationError) as caught:
        await client.send_bulk(
            1001,
            users,
            send_window="09-20",  # type: ignore[arg-type]
            daily_limit=0,
            lines=["+57300"],
            tz_for=3,  # type: ignore[arg-type]
        )
    assert [path for path, _ in caught.value.problems] == [
        "send_window",
        "daily_limit",
        "lines[0]",
        "tz_for",
    ]
    assert len(await received(sb)) == 1


async def test_the_daily_limit_holds_over_two_runs_and_a_rerun_sends_the_deferred(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll = await poll_of(client)
    journal = tmp_path / "runs.db"
    first = await client.send_bulk(poll, people(range(5)), journal=journal, run="a", daily_limit=3)
    assert (first.counts["accepted"], first.counts["deferred"]) == (3, 2)
    assert "daily limit of 3" in str(first.deferred[0].error)
    assert not first.complete
    second = await client.send_bulk(
        poll, people(range(10, 14)), journal=journal, run="b", daily_limit=3
    )
    assert (second.counts["accepted"], second.counts["deferred"]) == (0, 4)
    assert len(await received(sb)) == 3
    # The same day, the same limit: still deferred, never sent earlier.
    again = await client.send_bulk(poll, people(range(5)), journal=journal, run="a", daily_limit=3)
    assert (again.counts["accepted"], again.counts["deferred"]) == (3, 2)
    assert len(await received(sb)) == 3
    # Once the budget allows (here: a higher limit), a rerun sends them, once.
    last = await client.send_bulk(poll, people(range(5)), journal=journal, run="a", daily_limit=5)
    assert last.counts["deferred"] == 0
    got = Counter(user["cellphone"] for user in await received(sb))
    assert sorted(got) == [f"31{n:08d}" for n in range(5)]
    assert set(got.values()) == {1}
    async with SqliteLedger(journal) as ledger:
        assert (await ledger.counts("b"))[DEFERRED] == 4


async def test_lines_spread_evenly_and_stick_across_runs(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    poll = await poll_of(client)
    lines = (await sb.snapshot(users=False))["companies"][0]["lines"]
    journal = tmp_path / "runs.db"
    chosen = User(
        cellphone="3100000099",
        country_code="+57",
        user_session_keys=[deployment_squad(lines[1])],
    )
    await client.send_bulk(
        poll, [*people(range(5)), chosen], journal=journal, run="a", chunk_size=2, lines=lines
    )
    first = {user["cellphone"]: user["line"] for user in await received(sb)}
    assert Counter(first[f"31{n:08d}"] for n in range(5)) == Counter({lines[0]: 3, lines[1]: 2})
    assert first["3100000099"] == lines[1]
    squads = [
        key
        for user in await received(sb)
        for key in user["user_session_keys"]
        if key["key"] == "deployment_squad"
    ]
    assert len(squads) == 6  # one each: the chosen user's own kept, not doubled
    # Another run, the same people in another order and new ones: same lines.
    await client.send_bulk(
        poll, people(range(8, -1, -1)), journal=journal, run="b", chunk_size=3, lines=lines
    )
    second = (await received(sb))[6:]
    by_phone = {user["cellphone"]: user["line"] for user in second}
    assert {p: by_phone[p] for p in first if p != "3100000099"} == {
        p: line for p, line in first.items() if p != "3100000099"
    }
    load = Counter(by_phone.values())
    assert max(load.values()) - min(load.values()) <= 1


class LinelessLedger(MemoryLedger):
    """A ledger that fails to give lines (its store went away mid-run)."""

    async def assign_lines(self, phones: Sequence[str], lines: Sequence[str]) -> dict[str, str]:
        raise LedgerError("the ledger went away")


async def test_a_ledger_failing_to_give_lines_rejects_the_claim_unsent(
    sb: Sandbox, client: CampaignClient
) -> None:
    ledger = LinelessLedger()
    report = await client.send_bulk(
        await poll_of(client), people(range(3)), journal=ledger, lines=["15550000101"]
    )
    assert report.counts["rejected"] == 3
    assert isinstance(report.rejected[0].error, LedgerError)
    assert await received(sb) == []
    async with ledger:
        assert (await ledger.counts("poll-1001"))["rejected"] == 3  # not left in flight


def inside_everywhere(window: SendWindow, eta: int | None, at: datetime, phone: str) -> bool:
    """Whether a recipient sent at ``at`` with ``eta`` is messaged inside the
    window in every zone of its number."""
    when = at if eta is None else datetime.fromtimestamp(eta, UTC)
    zones = [ZoneInfo(name) for name in zone_names_of_phone(phone)]
    return bool(zones) and all(window.contains(when.astimezone(zone)) for zone in zones)


async def test_numbers_without_a_zone_are_deferred_by_reason_then_sent_with_a_default(
    sb: Sandbox, client: CampaignClient, tmp_path: Path
) -> None:
    """+57 330 has no zone: it was timed in UTC (04:00 in Bogota). Now it is
    deferred, in the report and the ledger, counted apart from the daily
    limit's, and a rerun with default_tz= times it in that zone."""
    poll = await poll_of(client)
    window = SendWindow("09:00", "21:00")
    path = tmp_path / "people.csv"
    path.write_text(
        "country_code,cellphone,tz\n"
        "+7,9161234567,\n"  # an empty cell: the number's zones, Kaliningrad to Kamchatka
        "+57,3301234567,\n"  # no zone known
        "+34,612345678,\n"  # Madrid and the Canaries
        "+57,3001234567,\n"
        "+57,3001234568,\n"
    )
    journal = tmp_path / "runs.db"
    before = datetime.now(UTC)
    first = await client.send_bulk(
        poll, users_from_csv(path), journal=journal, run="w", send_window=window, daily_limit=3
    )
    assert first.invalid == []  # an empty tz cell is no invalid row
    assert first.counts["accepted"] == 3
    assert first.deferred_reasons == {ZONE_UNKNOWN: 1, DAILY_LIMIT: 1}
    got = {user["country_code"] + user["cellphone"]: user for user in await received(sb)}
    assert "+573301234567" not in got
    for phone, user in got.items():
        assert inside_everywhere(window, user["deployment_eta"], before, phone), phone
    async with SqliteLedger(journal) as ledger:
        deferred = [record async for record in ledger.records("w", [DEFERRED])]
        stored = await ledger.report("w")
    reasons = {record.phone: deferral_reason(record.detail) for record in deferred}
    assert reasons == {"+573301234567": ZONE_UNKNOWN, "+573001234568": DAILY_LIMIT}
    assert stored.deferred_reasons == first.deferred_reasons
    # The rerun sends the deferred once allowed: the zone from default_tz, a
    # higher limit; nobody twice.
    before = datetime.now(UTC)
    again = await client.send_bulk(
        poll,
        users_from_csv(path),
        journal=journal,
        run="w",
        send_window=window,
        daily_limit=5,
        default_tz="America/Bogota",
    )
    assert again.counts["deferred"] == 0
    assert again.deferred_reasons == {}
    sent = await received(sb)
    assert Counter(u["country_code"] + u["cellphone"] for u in sent) == {
        phone: 1
        for phone in (
            "+79161234567",
            "+573301234567",
            "+34612345678",
            "+573001234567",
            "+573001234568",
        )
    }
    unzoned = next(u for u in sent if u["cellphone"] == "3301234567")
    eta = unzoned["deployment_eta"]
    at = before if eta is None else datetime.fromtimestamp(eta, UTC)
    assert window.contains(at.astimezone(ZoneInfo("America/Bogota")))


async def test_default_tz_is_checked_before_anything_is_sent(
    sb: Sandbox, client: CampaignClient
) -> None:
    for default_tz, window in (("Mars/Olympus", SendWindow("09:00", "20:00")), ("UTC", None)):
        with pytest.raises(ValidationError) as caught:
            await client.send_bulk(
                await poll_of(client), people(range(2)), send_window=window, default_tz=default_tz
            )
        assert [path for path, _ in caught.value.problems] == ["default_tz"]
    assert await received(sb) == []


async def test_a_recipient_the_window_cannot_be_held_for_when_sent_is_never_sent(
    sb: Sandbox, client: CampaignClient
) -> None:
    """Planned elsewhere (a producer whose zone database knew its tz), a
    recipient with no zone here rejects its request unsent: never a guess."""
    poll = await poll_of(client)
    ledger = MemoryLedger()
    keys = [{"key": "tz", "value": "Mars/Olympus"}]
    wire = {"country_code": "+57", "cellphone": "3001234567", "user_session_keys": keys}
    async with ledger:
        await ledger.start_run("r", str(poll))
        await ledger.save_run_options("r", SendRules(SendWindow("09:00", "20:00")).options())
        await ledger.plan("r", "c", [Recipient("+573001234567", 0, orjson.dumps(wire).decode())])
        result = await send_chunk(client, ledger, "r", "c")
        assert (await ledger.counts("r"))["rejected"] == 1
    assert result is not None
    assert result.outcome == "rejected"
    assert isinstance(result.error, NoOpening)
    assert await received(sb) == []
