"""A launch's stages (LaunchStages), the timeline and the chart: pure, no I/O."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from campaignkit import CampaignState, DeploymentStatus, status
from campaignkit.dashboard import LaunchStages, Sample, Stage, Timeline, launch_stages, stage_of
from campaignkit.dashboard._stages import STAGES
from campaignkit.dashboard._svg import chart_svg

S = DeploymentStatus
NON_FAILURES = {
    S.RECEIVED: Stage.WAITING,
    S.RECEIVED_BY_WORKER: Stage.WAITING,
    S.RETRY: Stage.WAITING,
    S.SUCCESS: Stage.SENT,
    S.PUSH_NOTIFICATION: Stage.DELIVERED,
    S.DELIVERED: Stage.DELIVERED,
}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_not_taken_is_waiting() -> None:
    assert stage_of(None) is Stage.WAITING


def test_the_dashboard_speaks_the_one_vocabulary() -> None:
    assert Stage is status.Stage
    assert stage_of is status.stage_of


@pytest.mark.parametrize("status", list(S), ids=str)
def test_every_known_status_has_its_stage(status: DeploymentStatus) -> None:
    assert stage_of(status) is NON_FAILURES.get(status, Stage.FAILED)


def test_the_wire_misspelling_is_delivered() -> None:
    assert stage_of(S("PUSH_NOTIFATION")) is Stage.DELIVERED


def test_an_unknown_status_is_its_own_stage() -> None:
    with pytest.warns(RuntimeWarning, match="unknown deployment status"):
        status = S("DASHBOARD_TEST_NEW_STATUS")
    assert stage_of(status) is Stage.UNKNOWN
    assert launch_stages({status: 2}).unknown == 2


def test_the_stages_of_counts() -> None:
    counts: Counter[DeploymentStatus | None] = Counter(
        {None: 4, S.RETRY: 1, S.RECEIVED: 2, S.SUCCESS: 3, S.DELIVERED: 5, S.REVOKED: 1}
    )
    counts.update({S.INVALID_PHONE: 2, S.FAILURE: 2})
    result = launch_stages(counts)
    assert result == LaunchStages(
        waiting=7,
        sent=3,
        delivered=5,
        failures=(("FAILURE", 2), ("INVALID_PHONE", 2), ("REVOKED", 1)),
    )
    assert (result.failed, result.total) == (5, 20)
    assert result.to_json() == {
        "waiting": 7,
        "sent": 3,
        "delivered": 5,
        "failed": 5,
        "unknown": 0,
        "total": 20,
        "done": 13,
        "failures": {"FAILURE": 2, "INVALID_PHONE": 2, "REVOKED": 1},
    }
    assert [stage for stage, _ in result.items()] == list(STAGES)


def test_zero_counts_leave_no_failure_row() -> None:
    assert launch_stages({S.FAILURE: 0, None: 1}).failures == ()


def sample(seconds: float, delivered: int, state: CampaignState = CampaignState.CLAIMED) -> Sample:
    return Sample(
        T0 + timedelta(seconds=seconds),
        state,
        LaunchStages(waiting=10 - delivered, delivered=delivered),
    )


def test_timeline_skips_repeats_and_keeps_its_ends_when_full() -> None:
    timeline = Timeline(limit=4)
    assert timeline.record(sample(0, 0))
    assert not timeline.record(sample(1, 0))
    for second in range(1, 10):
        timeline.record(sample(second, second))
    kept = timeline.samples
    assert len(kept) <= 4
    assert kept[0] == sample(0, 0)
    assert kept[-1] == sample(9, 9)
    assert [s.at for s in kept] == sorted(s.at for s in kept)


def test_chart_stacks_the_stages_over_time() -> None:
    svg = chart_svg([sample(0, 0), sample(30, 4), sample(60, 10, CampaignState.DONE)])
    assert svg.count("<polygon") == 2  # waiting and delivered; empty stages draw nothing
    assert 'class="area st-delivered"' in svg
    assert 'class="area st-waiting"' in svg
    assert ">60 s</text>" in svg
    assert ">10</text>" in svg  # the y axis tops at the largest total


def test_chart_of_one_sample_or_none() -> None:
    assert "<polygon" in chart_svg([sample(0, 3)])
    assert "<polygon" not in chart_svg([])


def test_the_last_sample_of_the_chart_has_a_width() -> None:
    svg = chart_svg([sample(0, 0), sample(60, 10)])  # delivered only in the last sample
    points = re.search(r'class="area st-delivered" points="([^"]+)"', svg)
    assert points is not None
    xs = {float(point.split(",")[0]) for point in points.group(1).split()}
    assert max(xs) - min(xs) > 10


def test_one_funnel_the_launch_stages_are_named_apart() -> None:
    """Issue 32: ``campaignkit.Funnel`` is a run's funnel, the only one; a
    launch's stages are :class:`LaunchStages`, the old names deprecated."""
    import campaignkit
    from campaignkit import dashboard

    assert "Funnel" not in dashboard.__all__
    assert "funnel" not in dashboard.__all__
    with pytest.warns(DeprecationWarning, match="dashboard.Funnel is deprecated"):
        assert getattr(dashboard, "Funnel") is LaunchStages  # noqa: B009
    with pytest.warns(DeprecationWarning, match="dashboard.funnel is deprecated"):
        assert getattr(dashboard, "funnel") is launch_stages  # noqa: B009
    assert getattr(campaignkit, "Funnel") is not LaunchStages  # noqa: B009


def test_a_sample_and_a_summary_hold_stages_their_old_funnel_deprecated() -> None:
    from campaignkit.dashboard import LaunchSummary

    stages = launch_stages({S.DELIVERED: 2})
    summary = LaunchSummary("l", None, stages)
    one = Sample(T0, None, stages)
    assert summary.stages is stages
    assert one.stages is stages
    with pytest.warns(DeprecationWarning, match=r"LaunchSummary.funnel is deprecated"):
        assert summary.funnel is stages
    with pytest.warns(DeprecationWarning, match=r"Sample.funnel is deprecated"):
        assert one.funnel is stages
    with pytest.warns(DeprecationWarning, match=r"LaunchStages.stages\(\) is deprecated"):
        assert stages.stages() == stages.items()


def test_a_watch_holds_stages_its_old_funnel_deprecated() -> None:
    from campaignkit.dashboard import Watch

    watch = Watch(
        cast(Any, None), "l", on_change=lambda: None, poll_interval=1, max_interval=1, linger=0
    )
    assert watch.stages == LaunchStages()
    assert watch.summary.stages is watch.stages
    with pytest.warns(DeprecationWarning, match=r"Watch.funnel is deprecated"):
        assert watch.funnel is watch.stages
