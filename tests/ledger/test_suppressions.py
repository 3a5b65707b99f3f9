"""The suppression list: the same rules in every ledger (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from helpers.ledgers import NewLedger, people
from helpers.phones import mobiles
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaignkit import DeploymentStatus, Phone, User
from campaignkit._input.validation import ledger_phone
from campaignkit.errors import LedgerError, ValidationError
from campaignkit.ledger import (
    ACCEPTED,
    IN_FLIGHT,
    MANUAL,
    OPT_OUT,
    PLANNED,
    REJECTED,
    SUPPRESSED,
    Ledger,
    Suppression,
    suppression_reason,
)
from campaignkit.webhooks import EventKind


async def listed(ledger: Ledger, *, page_size: int = 10_000) -> list[Suppression]:
    return [entry async for entry in ledger.suppressions(page_size=page_size)]


async def test_add_lookup_list_remove(ledger: Ledger) -> None:
    before = time.time()
    new = await ledger.suppress(
        [
            "+57 300-123-4567",
            User(cellphone="(300) 765 4321", country_code="+57"),
            {"country_code": "+1", "cellphone": "555 201 1234"},
        ],
        "asked us to stop",
        source="complaints.csv",
    )
    assert new == 3
    entry = await ledger.suppression("+573001234567")
    assert entry is not None
    assert (entry.phone, entry.reason, entry.source) == (
        "+573001234567",
        "asked us to stop",
        "complaints.csv",
    )
    assert before <= entry.added <= time.time()
    # Looked up as any of the forms it was given in.
    assert set(await ledger.suppressed(["+573007654321", "+15552011234", "+573000000000"])) == {
        "+573007654321",
        "+15552011234",
    }
    assert [e.phone for e in await listed(ledger)] == [
        "+15552011234",
        "+573001234567",
        "+573007654321",
    ]
    assert await ledger.unsuppress(["+57 300 123 4567", "+573000000000"]) == 1
    assert await ledger.suppression("+573001234567") is None
    assert [e.phone for e in await listed(ledger)] == ["+15552011234", "+573007654321"]


async def test_a_number_already_listed_keeps_its_entry(ledger: Ledger) -> None:
    assert (
        await ledger.suppress(["+573001234567"], "FAILURE_BY_OPTOUT_CONTACT", source="spring") == 1
    )
    first = await ledger.suppression("+573001234567")
    # Again (a redelivered event, an import run twice), under another reason.
    assert await ledger.suppress(["+573001234567", "+573001234567"], "other") == 0
    assert await ledger.suppression("+573001234567") == first
    assert await ledger.suppress("+573009999999") == 1  # one number, as text
    entry = await ledger.suppression("+573009999999")
    assert entry is not None
    assert (entry.reason, entry.source) == (MANUAL, None)


async def test_bad_numbers_are_named_and_nothing_is_listed(ledger: Ledger) -> None:
    with pytest.raises(ValidationError) as caught:
        await ledger.suppress(["+573001234567", "3001234567", 573001234567, "+57 300 abc"])
    message = str(caught.value)
    assert "phones[1]" in message
    assert "phones[2]" in message
    assert "phones[3]" in message
    assert "phones[0]" not in message
    assert await listed(ledger) == []
    with pytest.raises(ValidationError, match=r"phones\[0\]\.cellphone"):
        await ledger.unsuppress([User(cellphone="12", country_code="+57")])


@pytest.mark.parametrize(
    ("reason", "source", "field"),
    [
        ("", None, "reason"),
        ("  ", None, "reason"),
        (7, None, "reason"),
        ("ok", "", "source"),
        ("x" * 501, None, "reason"),
    ],
)
async def test_bad_reason_or_source_is_refused(
    ledger: Ledger, reason: object, source: str | None, field: str
) -> None:
    with pytest.raises(ValidationError, match=field):
        await ledger.suppress(["+573001234567"], reason, source=source)  # type: ignore[arg-type]
    assert await listed(ledger) == []


async def test_many_at_once_and_read_page_by_page(ledger: Ledger) -> None:
    phones = [f"+57300{n:07d}" for n in range(2500)]
    assert await ledger.suppress(reversed(phones), "import") == 2500
    assert [e.phone for e in await listed(ledger, page_size=700)] == phones
    assert len(await ledger.suppressed(phones)) == 2500
    assert await ledger.unsuppress(phones[:1200]) == 1200
    assert [e.phone for e in await listed(ledger, page_size=700)] == phones[1200:]


async def test_the_list_outlives_the_connection(new_ledger: NewLedger) -> None:
    async with new_ledger() as ledger:
        await ledger.suppress(["+573001234567"], OPT_OUT, source="run-1")
    async with new_ledger() as reopened:
        assert [(e.phone, e.reason, e.source) for e in await listed(reopened)] == [
            ("+573001234567", OPT_OUT, "run-1")
        ]


async def test_a_closed_ledger_refuses(new_ledger: NewLedger) -> None:
    ledger = new_ledger()
    with pytest.raises(LedgerError):
        await ledger.suppress(["+573001234567"])


def test_reasons_of_statuses_and_events() -> None:
    suppressing = {
        DeploymentStatus.FAILURE_BY_OPTOUT_CONTACT,
        DeploymentStatus.FAILURE_BY_BLOCKED_CONTACT,
        DeploymentStatus.INVALID_PHONE,
    }
    for status in DeploymentStatus:
        expected = status.value if status in suppressing else None
        assert suppression_reason(status) == expected
    with pytest.warns(RuntimeWarning, match="SOMETHING_NEW"):
        unknown = DeploymentStatus("SOMETHING_NEW")
    assert suppression_reason(unknown) is None
    for kind in EventKind:
        assert suppression_reason(kind) == (OPT_OUT if kind is EventKind.OPT_OUT else None)


@given(
    person=mobiles(),
    separators=st.lists(st.sampled_from([" ", "-", "(", ")"]), max_size=19),
)
def test_a_written_number_is_its_person(
    person: tuple[str, str, str], separators: list[str]
) -> None:
    _, code, national = person
    digits = code[1:] + national
    written = "+" + "".join(d + s for d, s in zip(digits, separators + [""] * 19, strict=False))
    problems: list[tuple[str, str]] = []
    assert ledger_phone(written, "phone", problems) == Phone.of(code, national).key
    assert problems == []


@given(st.text(max_size=25))
def test_a_phone_is_normalised_or_refused_by_name(text: str) -> None:
    problems: list[tuple[str, str]] = []
    phone = ledger_phone(text, "phones[4]", problems)
    if phone is None:
        assert [path for path, _ in problems] == ["phones[4]"]
    else:
        assert problems == []
        assert phone[0] == "+"
        assert phone[1:].isdigit()
        assert 5 <= len(phone) - 1 <= 19


# -- runs honour the list

RUN = "run-1"


async def states(ledger: Ledger) -> dict[str, tuple[str, str | None]]:
    return {r.phone: (r.state, r.detail) async for r in ledger.records(RUN)}


async def test_a_listed_number_is_filed_suppressed_not_planned(ledger: Ledger) -> None:
    await ledger.suppress(["+573000000001"], "FAILURE_BY_OPTOUT_CONTACT")
    await ledger.suppress(["+573000000003"], "asked us to stop")
    await ledger.start_run(RUN, "poll-1")
    not_sent = await ledger.plan(RUN, "c1", people(4))
    assert sorted((r.phone, r.state, r.detail) for r in not_sent) == [
        ("+573000000001", SUPPRESSED, "FAILURE_BY_OPTOUT_CONTACT"),
        ("+573000000003", SUPPRESSED, "asked us to stop"),
    ]
    assert all(r.user for r in not_sent)  # kept, for exports
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    assert [r.phone for r in claim.recipients] == ["+573000000000", "+573000000002"]
    assert await ledger.claim(RUN, "c1") is None
    assert await ledger.unenqueued_chunks(RUN) == []
    await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id="L1")
    counts = await ledger.counts(RUN)
    assert (counts[ACCEPTED], counts[SUPPRESSED], counts[PLANNED]) == (2, 2, 0)
    await ledger.finish_input(RUN, 4)
    report = await ledger.report(RUN)
    assert report.counts["suppressed"] == 2
    assert report.counts["accepted"] == 2
    assert sum(report.counts.values()) == report.total == 4
    assert [(s.position, s.phone, s.reason) for s in report.suppressed] == [
        (1, "+573000000001", "FAILURE_BY_OPTOUT_CONTACT"),
        (3, "+573000000003", "asked us to stop"),
    ]
    assert [u.cellphone for u in report.users_for("suppressed")] == ["3000000001", "3000000003"]
    assert report.complete


async def test_a_run_told_to_ignore_the_list_plans_everyone(ledger: Ledger) -> None:
    await ledger.suppress(["+573000000001"], "manual")
    await ledger.start_run(RUN, "poll-1")
    assert await ledger.plan(RUN, "c1", people(3), ignore_suppression=True) == []
    assert (await ledger.counts(RUN))[PLANNED] == 3
    # And a rerun that ignores it plans a recipient suppressed before.
    await ledger.plan(RUN, "c2", people(3, first=3))
    await ledger.suppress(["+573000000004"])
    assert [r.state for r in await ledger.plan(RUN, "c3", people(2, first=4))] == [SUPPRESSED]
    assert await ledger.plan(RUN, "c4", people(1, first=4), ignore_suppression=True) == []
    claim = await ledger.claim(RUN, "c4")
    assert claim is not None
    assert [r.phone for r in claim.recipients] == ["+573000000004"]


async def test_a_rerun_plans_again_a_number_taken_off_the_list(ledger: Ledger) -> None:
    await ledger.suppress(["+573000000000", "+573000000001"], "INVALID_PHONE")
    await ledger.start_run(RUN, "poll-1")
    await ledger.plan(RUN, "pass1", people(3))
    first = await ledger.claim(RUN, "pass1")
    assert first is not None
    await ledger.settle(RUN, first.token, ACCEPTED, launch_request_id="L1")
    await ledger.unsuppress(["+573000000000"])
    await ledger.suppress(["+573000000002"], "opt_out")  # listed after it was sent
    not_sent = await ledger.plan(RUN, "pass2", people(3))
    assert sorted((r.phone, r.state) for r in not_sent) == [
        ("+573000000001", SUPPRESSED),
        ("+573000000002", ACCEPTED),  # sent already: its record is kept
    ]
    again = await ledger.claim(RUN, "pass2")
    assert again is not None
    assert [r.phone for r in again.recipients] == ["+573000000000"]
    assert await states(ledger) == {
        "+573000000000": (IN_FLIGHT, None),
        "+573000000001": (SUPPRESSED, "INVALID_PHONE"),
        "+573000000002": (ACCEPTED, None),
    }


async def test_planned_and_rejected_recipients_listed_since_are_suppressed(
    ledger: Ledger,
) -> None:
    await ledger.start_run(RUN, "poll-1")
    await ledger.plan(RUN, "old", people(2))  # an interrupted producer's
    await ledger.plan(RUN, "bad", people(1, first=2))
    rejected = await ledger.claim(RUN, "bad")
    assert rejected is not None
    await ledger.settle(RUN, rejected.token, REJECTED, detail="CampaignKitError: no")
    await ledger.suppress(["+573000000001", "+573000000002"], "FAILURE_BY_BLOCKED_CONTACT")
    not_sent = await ledger.plan(RUN, "new", people(3), retry_rejected=True)
    assert sorted((r.phone, r.state) for r in not_sent) == [
        ("+573000000001", SUPPRESSED),
        ("+573000000002", SUPPRESSED),
    ]
    assert await ledger.claim(RUN, "old") is None  # its recipients moved on
    claim = await ledger.claim(RUN, "new")
    assert claim is not None
    assert [r.phone for r in claim.recipients] == ["+573000000000"]
    counts = await ledger.counts(RUN)
    assert (counts[IN_FLIGHT], counts[SUPPRESSED], counts[REJECTED]) == (1, 2, 0)


async def test_a_rejected_recipient_not_retried_keeps_its_record(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "poll-1")
    await ledger.plan(RUN, "c1", people(1))
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    await ledger.settle(RUN, claim.token, REJECTED, detail="CampaignKitError: no")
    await ledger.suppress(["+573000000000"])
    assert [r.state for r in await ledger.plan(RUN, "c2", people(1))] == [REJECTED]


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    order=st.permutations(range(10)),
    lists=st.lists(st.sets(st.integers(0, 9)), min_size=2, max_size=2),
    ignoring=st.lists(st.booleans(), min_size=2, max_size=2),
    chunk_size=st.integers(1, 5),
)
def test_two_passes_never_send_a_listed_number_and_send_it_once_unlisted(
    new_ledger: NewLedger,
    order: list[int],
    lists: list[set[int]],
    ignoring: list[bool],
    chunk_size: int,
) -> None:
    """Whatever the list holds in each pass of a run, and whether a pass
    ignores it: nobody is claimed twice, a listed number only by a pass that
    ignores the list, and at the end everyone is accepted or suppressed."""
    everyone = people(10)
    by_number = {n: everyone[n] for n in range(10)}
    run = f"run-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        async with new_ledger() as ledger:
            await ledger.start_run(run, "poll-1")
            claimed: set[str] = set()
            for number, (listed, ignore) in enumerate(zip(lists, ignoring, strict=True)):
                await ledger.unsuppress([r.phone for r in everyone])
                await ledger.suppress([by_number[n].phone for n in listed], f"list {number}")
                listed_phones = {by_number[n].phone for n in listed}
                unsent = {r.phone for r in everyone} - claimed
                for start in range(0, 10, chunk_size):
                    chunk = f"pass{number}-{start}"
                    recipients = [by_number[n] for n in order[start : start + chunk_size]]
                    await ledger.plan(run, chunk, recipients, ignore_suppression=ignore)
                    claim = await ledger.claim(run, chunk)
                    taken = set() if claim is None else {r.phone for r in claim.recipients}
                    assert not taken & claimed  # nobody twice
                    assert ignore or not taken & listed_phones
                    claimed |= taken
                    if claim is not None:
                        await ledger.settle(run, claim.token, ACCEPTED, launch_request_id="L")
                # Everyone not sent yet was sent by this pass, unless listed.
                expected = unsent if ignore else unsent - listed_phones
                assert expected <= claimed
            counts = await ledger.counts(run)
            assert counts[ACCEPTED] == len(claimed)
            assert counts[ACCEPTED] + counts[SUPPRESSED] == 10
            async for record in ledger.records(run, [SUPPRESSED]):
                assert record.detail == "list 1"

    asyncio.run(scenario())


async def test_two_writers_of_overlapping_numbers_count_each_once(new_ledger: NewLedger) -> None:
    phones = [f"+57300{n:07d}" for n in range(3000)]
    async with new_ledger() as one, new_ledger() as two:
        new = await asyncio.gather(
            one.suppress(phones[:2000], "one"), two.suppress(phones[1000:][::-1], "two")
        )
        assert sum(new) == 3000
        assert [e.phone for e in await listed(one)] == phones
        assert {e.reason async for e in two.suppressions()} <= {"one", "two"}


async def test_a_number_listed_after_it_was_planned_is_not_claimed(ledger: Ledger) -> None:
    await ledger.start_run(RUN, "poll-1")
    await ledger.plan(RUN, "c1", people(3))  # a worker's chunk, waiting in the queue
    await ledger.suppress(["+573000000001"], "opt_out", source="webhook")
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    assert [r.phone for r in claim.recipients] == ["+573000000000", "+573000000002"]
    assert (await states(ledger))["+573000000001"] == (SUPPRESSED, "opt_out")
    await ledger.settle(RUN, claim.token, ACCEPTED, launch_request_id="L1")
    assert await ledger.claim(RUN, "c1") is None
    assert await ledger.unenqueued_chunks(RUN) == []
    report = await ledger.report(RUN)
    assert (report.counts["accepted"], report.counts["suppressed"]) == (2, 1)


async def test_a_run_ignoring_the_list_sends_what_was_listed_when_it_planned(
    ledger: Ledger,
) -> None:
    # Not what is listed while it is under way: an opt-out then still stops it.
    await ledger.suppress(["+573000000000"], "manual")
    await ledger.start_run(RUN, "poll-1")
    assert await ledger.plan(RUN, "c1", people(2), ignore_suppression=True) == []
    await ledger.suppress(["+573000000001"], "opt_out")
    claim = await ledger.claim(RUN, "c1")
    assert claim is not None
    assert [r.phone for r in claim.recipients] == ["+573000000000"]
    assert (await states(ledger))["+573000000001"] == (SUPPRESSED, "opt_out")
