"""campaignkit.progress: the pure parts of ProgressUpdate (a run's snapshot,
the failure ranking, the ETA) and the throttle, on fake time."""

from __future__ import annotations

import importlib
from collections.abc import AsyncGenerator, Callable

import attrs
import pytest
from helpers.fakes import FakeTime

from campaignkit import CampaignState, DeploymentStatus, Funnel, ValidationError
from campaignkit._funnel import build_funnel
from campaignkit.progress import (
    Eta,
    ProgressUpdate,
    campaign_update,
    check_every,
    percent,
    run_update,
    throttled,
    top_failures,
)
from campaignkit.status import Stage, stage_of


def update(done: int, total: int = 10, *, finished: bool = False) -> ProgressUpdate:
    return ProgressUpdate(done, total, done, 0, {Stage.DELIVERED: done}, finished=finished)


def test_top_failures_are_the_largest_counts_first_ties_by_name_zeros_left_out() -> None:
    counts = [("b", 2), ("a", 2), ("c", 5), ("d", 0), ("e", 1), ("f", 1), ("g", 1)]
    assert top_failures(counts) == (("c", 5), ("a", 2), ("b", 2), ("e", 1), ("f", 1))
    assert top_failures(counts, limit=2) == (("c", 5), ("a", 2))
    assert top_failures([]) == ()


def test_a_run_update_counts_settled_inputs_and_failures_by_ledger_state() -> None:
    counts = {
        "planned": 3,
        "in_flight": 2,
        "accepted": 10,
        "rejected": 4,
        "ambiguous": 1,
        "invalid": 5,
        "duplicate": 2,
    }
    got = run_update(counts, None, False)
    # Accepted by the service is sent, not delivered: delivery is per launch.
    assert (got.done, got.total, got.sent, got.delivered, got.failed) == (22, 27, 10, 0, 10)
    assert got.skipped == 2
    assert got.summary() == (
        "22/27 settled (81% of inputs): 5 waiting, 10 sent, 10 failed, 2 skipped"
    )
    assert got.failures == (("invalid", 5), ("rejected", 4), ("ambiguous", 1))
    assert got.state is CampaignState.CLAIMED
    assert got.states == counts
    assert not got.statuses
    assert dict(got.counts) == {
        **dict.fromkeys(Stage, 0),
        Stage.WAITING: 5,
        Stage.SENT: 10,
        Stage.FAILED: 10,
        Stage.SKIPPED: 2,
    }
    assert not got.finished
    # The producer's total once it has read the input; a run done is DONE.
    done = run_update({**counts, "planned": 0, "in_flight": 0, "accepted": 15}, 40, True)
    assert (done.total, done.state, done.finished) == (40, CampaignState.DONE, True)


def test_a_run_update_with_its_funnel_counts_what_became_of_the_accepted() -> None:
    counts = {"planned": 0, "in_flight": 0, "accepted": 10, "rejected": 2, "duplicate": 1}
    outcomes = Funnel(planned=12, accepted=10, delivered=6, failed={"INVALID_PHONE": 3})
    got = run_update(counts, None, True, outcomes)
    assert (got.sent, got.delivered, got.failed, got.skipped) == (1, 6, 5, 1)
    assert got.failures == (("INVALID_PHONE", 3), ("rejected", 2))
    assert got.summary() == (
        "13/13 settled (100% of inputs): 1 sent, 6 delivered, 5 failed, 1 skipped"
    )
    assert "INVALID_PHONE x3: the number is invalid" in got.text()


def test_a_share_is_whole_only_when_it_is_whole() -> None:
    # 199 of 200 settled said "(100%)" beside "1 waiting" (and the
    # dashboard "100%" beside a waiting share).
    got = ProgressUpdate(done=199, total=200, delivered=198, failed=0, sent=1, counts={})
    assert got.summary() == "199/200 settled (99% of recipients): 1 waiting, 1 sent, 198 delivered"
    shares = [(0, 7), (1, 20_000), (3, 200), (199, 200), (19_999, 20_000), (7, 7), (0, 0)]
    assert [percent(n, total) for n, total in shares] == [
        "0%",
        "<0.1%",
        "1.5%",
        "99%",
        "99%",
        "100%",
        "0%",
    ]


def test_a_run_with_nothing_settled_is_pending() -> None:
    got = run_update({"planned": 5, "in_flight": 1}, None, False)
    assert (got.done, got.total, got.state, got.failures) == (0, 6, CampaignState.PENDING, ())


def test_updates_are_equal_when_they_show_the_same_progress() -> None:
    one = update(3)
    assert attrs.evolve(one, elapsed=5.0, rate=1.0, eta=7.0) == one
    assert update(4) != one
    assert attrs.evolve(one, state=CampaignState.DONE) != one
    assert (one.fraction, ProgressUpdate(0, 0, 0, 0, {}).fraction) == (0.3, 0.0)


def test_the_eta_is_the_rate_over_the_window_until_done() -> None:
    eta = Eta(window=10.0)
    assert eta.observe(100.0, 0, 100) == (None, None)  # one sample: no rate yet
    assert eta.observe(102.0, 0, 100) == (0.0, None)  # no progress: no estimate
    assert eta.observe(104.0, 20, 100) == (5.0, 16.0)  # 20 in 4 s, 80 left
    assert eta.observe(110.0, 50, 100) == (5.0, 10.0)
    # Samples older than the window are dropped: the rate is the recent one.
    rate, left = eta.observe(114.0, 90, 100)
    assert (rate, left) == (7.0, 10 / 7)  # since 104
    rate, left = eta.observe(115.0, 100, 100)
    assert (rate, left) == (80 / 11, 0.0)


def test_every_must_be_a_positive_number() -> None:
    assert check_every(2) == 2.0
    for bad in (0, -1.0, True, "2", None):
        with pytest.raises(ValidationError, match="every"):
            check_every(bad)


async def scripted(
    time: FakeTime, steps: list[tuple[float, ProgressUpdate]]
) -> AsyncGenerator[ProgressUpdate]:
    """Each reading after its wait, as a tracker's polls would come."""
    for wait, reading in steps:
        await time.sleep(wait)
        yield reading


async def throttle(
    time: FakeTime, steps: list[tuple[float, ProgressUpdate]], every: float
) -> list[tuple[float, ProgressUpdate]]:
    """(when, update) of each update yielded."""
    readings = scripted(time, steps)
    return [(time.now, u) async for u in throttled(readings, every, time.clock, time.sleep)]


async def test_the_throttle_yields_changed_progress_at_most_once_per_every() -> None:
    time = FakeTime()
    steps = [
        (0.0, update(1)),  # first: at once
        (1.0, update(2)),  # 1 s later: held back
        (1.0, update(2)),  # 2 s after the first: shows other progress than it
        (1.0, update(2)),  # the same as the last yielded: not again
        (3.0, update(3)),
    ]
    got = await throttle(time, steps, 2.0)
    assert [(at - 1000.0, u.done) for at, u in got] == [(0.0, 1), (2.0, 2), (6.0, 3)]
    assert [u.elapsed for _, u in got] == [0.0, 2.0, 6.0]
    assert got[1][1].rate == 0.5  # one more done in 2 s
    assert got[1][1].eta == 16.0  # 8 left at 0.5/s
    assert not any(u.finished for _, u in got)


async def test_the_finished_reading_is_always_yielded_every_seconds_after_the_last() -> None:
    time = FakeTime()
    steps = [(0.0, update(1)), (0.5, update(2)), (0.5, update(10, finished=True))]
    got = await throttle(time, steps, 2.0)
    assert [(at - 1000.0, u.done, u.finished) for at, u in got] == [
        (0.0, 1, False),
        (2.0, 10, True),  # read at 1 s, held until 2 s after the first
    ]
    assert time.sleeps == [0.0, 0.5, 0.5, 1.0]
    assert (got[-1][1].elapsed, got[-1][1].eta) == (2.0, 0.0)
    # Alone, or long after the last one, it waits for nothing.
    time = FakeTime()
    got = await throttle(time, [(0.0, update(10, finished=True))], 2.0)
    assert [u.finished for _, u in got] == [True]
    assert time.sleeps == [0.0]


async def test_breaking_out_of_the_throttle_closes_the_readings() -> None:
    time = FakeTime()
    closed: list[bool] = []

    async def readings() -> AsyncGenerator[ProgressUpdate]:
        try:
            for done in range(100):
                await time.sleep(5.0)
                yield update(done)
        finally:
            closed.append(True)

    updates = throttled(readings(), 1.0, time.clock, time.sleep)
    async for got in updates:
        assert got.done == 0
        break
    await updates.aclose()
    assert closed == [True]


S = DeploymentStatus


def test_a_request_done_beside_nobody_settled_says_so_in_words() -> None:
    # The service took the whole request (DONE) but nobody's message left yet:
    # never "0/200 DONE".
    got = campaign_update({None: 150, S.RECEIVED: 50}, CampaignState.DONE, False)
    text = got.text()
    assert "0/200 settled (0% of recipients): 200 waiting" in text
    assert "DONE" not in text
    assert CampaignState.DONE.description in text


def test_the_finished_text_counts_every_person_once_sent_apart_from_delivered() -> None:
    counts: dict[DeploymentStatus | None, int] = {S.DELIVERED: 140, S.PUSH_NOTIFICATION: 3}
    counts |= {S.SUCCESS: 47, S.INVALID_PHONE: 6, S.RETRY: 4}
    got = campaign_update(counts, CampaignState.DONE, True)
    assert (got.delivered, got.sent, got.failed, got.waiting) == (143, 47, 6, 4)
    assert sum(got.stages().values()) == got.total == 200
    lines = got.text().splitlines()
    assert lines[0].startswith("Finished")
    assert lines[1] == (
        "196/200 settled (98% of recipients): 4 waiting, 47 sent, 143 delivered, 6 failed"
    )
    assert lines[2] == f"INVALID_PHONE x6: {S.INVALID_PHONE.description}"


def test_an_unknown_status_is_settled_and_shown_as_unknown() -> None:
    with pytest.warns(RuntimeWarning):
        odd = DeploymentStatus("BRAND_NEW_STATUS_FOR_PROGRESS")
    got = campaign_update({odd: 2, S.DELIVERED: 1}, CampaignState.DONE, True)
    assert got.summary() == "3/3 settled (100% of recipients): 1 delivered, 2 unknown"


def test_tracking_that_ended_before_done_is_not_called_finished() -> None:
    got = campaign_update({}, CampaignState.PENDING, True)
    assert got.text().splitlines() == [
        f"Stopped following; request {CampaignState.PENDING.description}",
        "0/0 settled (0% of recipients): no deployment shown by the service yet",
    ]


@pytest.mark.parametrize(
    ("module", "old"),
    [
        ("campaignkit", "BulkProgress"),
        ("campaignkit.bulk", "BulkProgress"),
        ("campaignkit.workers", "RunProgress"),
    ],
)
def test_the_old_progress_types_are_deprecated_names_of_progress_update(
    module: str, old: str
) -> None:
    imported = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{module}.{old} is deprecated"):
        assert getattr(imported, old) is ProgressUpdate
    with pytest.raises(AttributeError):
        imported.NoSuchThing  # noqa: B018


def test_counts_are_by_stage_the_statuses_beside_them() -> None:
    """Issue 32: ``counts`` had two meanings (statuses for a campaign, ledger
    states for a run); it is keyed by ``Stage`` for both, and what it was
    read from is in ``statuses`` or ``states``."""
    statuses: dict[DeploymentStatus | None, int] = {None: 1, S.SUCCESS: 2, S.FAILURE: 3}
    got = campaign_update(statuses, CampaignState.CLAIMED, False)
    assert got.statuses == statuses
    assert not got.states
    assert set(got.counts) == set(Stage)
    assert {stage: n for stage, n in got.counts.items() if n} == got.stages()
    assert got.counts[Stage.WAITING] == 1
    assert got.counts["sent"] == 2  # type: ignore[index]  # a Stage is its word
    assert got.counts[Stage.READ] == 0


@pytest.mark.parametrize(
    ("make", "key", "value"),
    [
        (lambda: campaign_update({S.DELIVERED: 4}, None, False), S.DELIVERED, 4),
        (lambda: campaign_update({None: 2}, None, False), None, 2),
        (lambda: run_update({"accepted": 3, "rejected": 1}, None, True), "accepted", 3),
    ],
)
def test_the_old_keys_of_counts_still_read_deprecated(
    make: Callable[[], ProgressUpdate], key: object, value: int
) -> None:
    got = make()
    with pytest.warns(DeprecationWarning, match="keyed by Stage"):
        assert got.counts[key] == value  # type: ignore[index]
    with pytest.warns(DeprecationWarning, match="keyed by Stage"), pytest.raises(KeyError):
        got.counts["no such state"]  # type: ignore[index]


def test_the_stages_of_a_status_are_the_same_in_every_roll_up() -> None:
    """One classification: a campaign's update and a run's funnel put every
    status where :func:`stage_of` does."""
    for status in DeploymentStatus:
        stage = stage_of(status)
        one = campaign_update({status: 1}, None, False)
        assert one.stages() == {stage: 1}
        funnel = build_funnel({"accepted": 1}, [(status.value, False, False, False, False, 1)])
        assert funnel.delivered == (stage is Stage.DELIVERED), status
        assert bool(funnel.failed) == (stage is Stage.FAILED), status


def test_the_updates_text_names_the_base_of_its_share_and_says_not_followed() -> None:
    """Issue 32: the text bots print names the base of its share (a run's
    inputs, a campaign's recipients), and a run nobody followed says "not
    followed", never "0 delivered"."""
    campaign = campaign_update({S.DELIVERED: 1, None: 1}, CampaignState.CLAIMED, False)
    assert "1/2 settled (50% of recipients)" in campaign.text()
    counts = {"accepted": 4, "duplicate": 1}
    quiet = run_update(counts, None, True, build_funnel(counts, []))
    text = quiet.text()
    assert "5/5 settled (100% of inputs)" in text
    assert "4 planned → 4 accepted → delivered: not followed" in text
    assert "0 delivered" not in text
    followed = build_funnel(counts, [("DELIVERED", True, False, False, False, 4)])
    assert "4 accepted → 4 delivered → 0 read" in run_update(counts, None, True, followed).text()
