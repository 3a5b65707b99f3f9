"""The guards' judgements (canary, breaker, template statuses) and their
validation: pure, so every boundary is tried."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from campaignkit import Breaker, Canary, ValidationError
from campaignkit._guards import Verdict, template_pauses
from campaignkit.cli.argtypes import duration

WAIT = timedelta(minutes=15)


def fields(error: ValidationError) -> set[str]:
    return {field for field, _ in error.problems}


@pytest.mark.parametrize(
    ("given_fields", "named"),
    [
        ({"size": 0}, {"size"}),
        ({"size": True}, {"size"}),
        ({"size": 2.5}, {"size"}),
        ({"wait": 900}, {"wait"}),
        ({"wait": timedelta(0)}, {"wait"}),
        ({"min_delivered": 1.5}, {"min_delivered"}),
        ({"max_failed": -0.1}, {"max_failed"}),
        ({"max_failed": "5%"}, {"max_failed"}),
        ({"size": -1, "max_failed": 2}, {"size", "max_failed"}),
    ],
)
def test_a_canary_names_each_field_at_fault(
    given_fields: dict[str, object], named: set[str]
) -> None:
    with pytest.raises(ValidationError) as raised:
        Canary(**given_fields)  # type: ignore[arg-type]
    assert fields(raised.value) == named


@pytest.mark.parametrize(
    ("given_fields", "named"),
    [
        ({"over": 0}, {"over"}),
        ({"over": 1.0}, {"over"}),
        ({"max_failed": float("nan")}, {"max_failed"}),
        ({"max_failed": True}, {"max_failed"}),
        ({"max_failed": 1.01, "over": False}, {"max_failed", "over"}),
    ],
)
def test_a_breaker_names_each_field_at_fault(
    given_fields: dict[str, object], named: set[str]
) -> None:
    with pytest.raises(ValidationError) as raised:
        Breaker(**given_fields)  # type: ignore[arg-type]
    assert fields(raised.value) == named


def test_the_guards_are_frozen_values_with_the_designs_defaults() -> None:
    assert Canary() == Canary(size=200, wait=WAIT, min_delivered=0.8, max_failed=0.05)
    assert Breaker() == Breaker(max_failed=0.2, over=500)
    with pytest.raises(AttributeError):
        Breaker().over = 3  # type: ignore[misc]


def test_a_breaker_pauses_past_its_share_and_names_the_base() -> None:
    breaker = Breaker(max_failed=0.1, over=500)
    paused = breaker.judge(500, 60)
    assert paused.verdict is Verdict.PAUSE
    assert "12% of 500 settled recipients failed (60)" in paused.detail
    assert breaker.judge(500, 50).verdict is Verdict.GO  # at the share: not past it
    # Fewer settled than ``over``: judged over ``over`` (the rest may still fail).
    early = breaker.judge(100, 51)
    assert early.verdict is Verdict.PAUSE
    assert "51 of 100 settled recipients failed (10.2% of the 500" in early.detail
    assert breaker.judge(100, 50).verdict is Verdict.GO


@given(
    max_failed=st.floats(0, 1),
    over=st.integers(1, 2000),
    settled=st.integers(0, 2000),
    data=st.data(),
)
def test_a_breaker_pauses_exactly_when_the_share_passes(
    max_failed: float, over: int, settled: int, data: st.DataObject
) -> None:
    failed = data.draw(st.integers(0, settled))
    verdict = Breaker(max_failed=max_failed, over=over).judge(settled, failed).verdict
    assert verdict is (Verdict.PAUSE if failed / max(settled, over) > max_failed else Verdict.GO)


def test_a_canary_goes_on_when_its_shares_hold() -> None:
    canary = Canary(size=100, wait=WAIT, min_delivered=0.8, max_failed=0.05)
    judged = canary.judge(100, 96, 4, waited=timedelta(minutes=3))
    assert judged.verdict is Verdict.GO
    assert "96% of 100 canary recipients were delivered" in judged.detail


def test_a_canary_pauses_as_soon_as_failures_pass_its_share() -> None:
    canary = Canary(size=100, wait=WAIT, min_delivered=0.8, max_failed=0.05)
    judged = canary.judge(100, 10, 6, waited=timedelta(seconds=5))
    assert judged.verdict is Verdict.PAUSE
    assert "6% of 100 canary recipients failed (6)" in judged.detail


def test_a_canary_waits_then_judges_what_was_delivered() -> None:
    canary = Canary(size=100, wait=WAIT, min_delivered=0.8, max_failed=0.05)
    assert canary.judge(100, 70, 0, waited=timedelta(minutes=1)).verdict is Verdict.WAIT
    late = canary.judge(100, 70, 0, waited=WAIT)
    assert late.verdict is Verdict.PAUSE
    assert "70% of 100 canary recipients were delivered (70) within 15 min" in late.detail
    # Enough delivered, but the unsettled ones could still pass max_failed: wait, then go.
    assert canary.judge(100, 90, 0, waited=timedelta(minutes=1)).verdict is Verdict.WAIT
    assert canary.judge(100, 90, 0, waited=WAIT).verdict is Verdict.GO


def test_a_canary_with_no_accepted_recipient_has_nothing_to_judge() -> None:
    assert Canary().judge(0, 0, 0, waited=timedelta(0)).verdict is Verdict.GO


@given(
    accepted=st.integers(1, 1000),
    data=st.data(),
    min_delivered=st.floats(0, 1),
    max_failed=st.floats(0, 1),
    waited=st.timedeltas(timedelta(0), timedelta(hours=1)),
)
def test_a_canary_never_goes_on_below_its_shares(
    accepted: int, data: st.DataObject, min_delivered: float, max_failed: float, waited: timedelta
) -> None:
    delivered = data.draw(st.integers(0, accepted))
    failed = data.draw(st.integers(0, accepted - delivered))
    canary = Canary(size=accepted, wait=WAIT, min_delivered=min_delivered, max_failed=max_failed)
    verdict = canary.judge(accepted, delivered, failed, waited=waited).verdict
    if verdict is Verdict.GO:
        assert delivered >= min_delivered * accepted
        assert failed <= max_failed * accepted
    if failed > max_failed * accepted:
        assert verdict is Verdict.PAUSE
    if waited >= WAIT or delivered + failed == accepted:
        assert verdict is not Verdict.WAIT


def test_judging_refuses_impossible_figures() -> None:
    with pytest.raises(ValueError, match="failed"):
        Breaker().judge(3, 4)
    with pytest.raises(ValueError, match="accepted"):
        Canary().judge(-1, 0, 0, waited=WAIT)


@pytest.mark.parametrize(
    ("status", "pauses"),
    [
        ("PAUSED", True),
        ("DISABLED", True),
        ("disabled", True),
        ("APPROVED", False),
        ("REJECTED", False),
        (None, False),
        ("", False),
    ],
)
def test_template_statuses_that_pause_every_run(status: str | None, pauses: bool) -> None:
    assert template_pauses(status) is pauses


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", timedelta(hours=24)),
        ("90m", timedelta(minutes=90)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("2d", timedelta(days=2)),
        ("45s", timedelta(seconds=45)),
        ("1d2h3m4s", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        (" 12H ", timedelta(hours=12)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert duration(text) == expected


@pytest.mark.parametrize("text", ["24", "0h", "", "h", "1.5h", "30m1h", "1 h", "-2h", "1w"])
def test_a_duration_without_its_units_is_refused_naming_them(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as raised:
        duration(text)
    if text != "0h":
        assert "h (hours)" in str(raised.value)


@given(
    st.timedeltas(timedelta(seconds=1), timedelta(days=9999)).map(
        lambda t: timedelta(seconds=int(t.total_seconds()))
    )
)
def test_a_duration_reads_back_what_it_writes(value: timedelta) -> None:
    days, rest = divmod(int(value.total_seconds()), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{days}d{hours}h{minutes}m{seconds}s"
    assert duration(text) == value
