"""Deployment and campaign statuses: members, alias, unknown values, classification."""

from __future__ import annotations

import warnings

import pytest

from campaignkit import CampaignState, DeploymentStatus, is_in_progress
from campaignkit import status as status_module

# The spec's deployment-status table, in order.
SPEC_STATUSES = [
    "RECEIVED",
    "RECEIVED_BY_WORKER",
    "RETRY",
    "SUCCESS",
    "DELIVERED",
    "PUSH_NOTIFICATION",
    "REVOKED",
    "VALIDATION_ERROR",
    "INVALID_PHONE",
    "INVALID_POLL",
    "MISSING_PARAMETER",
    "PARAMETER_MISMATCH",
    "CHARACTER_LIMIT_HEADER",
    "CHARACTER_LIMIT_BODY",
    "FAILURE",
    "FAILURE_BY_HUMAN_HANDOVER",
    "FAILURE_BY_RATE_LIMIT",
    "COMPANY_RATE_LIMIT",
    "FAILURE_BY_TIER_CAPACITY",
    "FAILURE_BY_BLOCKED_CONTACT",
    "FAILURE_BY_OPTOUT_CONTACT",
    "FAILURE_BY_DISABLED_HSM",
    "FAILURE_BY_SPAM_RATE_LIMIT",
    "FAILURE_BY_EXPERIMENT_NUMBER",
    "FAILURE_BY_META_CHOSE_NOT_DELIVER",
    "FAILURE_BY_TEST_CHANNEL",
    "FAILURE_BY_MEDIA_UPLOAD_ERROR",
    "FAILURE_BY_DEPLOYMENT_LIMIT_REACHED",
    "FAILURE_BY_UNABLE_TO_CONTACT",
    "FAILURE_BY_PAYMENT_ISSUE",
]
IN_PROGRESS = {"RECEIVED", "RECEIVED_BY_WORKER", "RETRY"}
SUCCESS = {"SUCCESS", "DELIVERED", "PUSH_NOTIFICATION"}
FINAL_SUCCESS = {"DELIVERED", "PUSH_NOTIFICATION"}


def test_members_are_the_spec_table_in_order() -> None:
    assert len(SPEC_STATUSES) == 30
    assert [m.value for m in DeploymentStatus] == SPEC_STATUSES
    assert [m.value for m in CampaignState] == ["PENDING", "CLAIMED", "DONE"]


@pytest.mark.parametrize("value", SPEC_STATUSES)
def test_classification(value: str) -> None:
    status = DeploymentStatus(value)
    assert status.value == value
    assert not status.is_unknown
    assert status.is_in_progress is (value in IN_PROGRESS)
    assert status.is_success is (value in SUCCESS)
    assert status.is_failure is (value not in IN_PROGRESS | SUCCESS)
    assert status.is_final is (value not in IN_PROGRESS | {"SUCCESS"})
    assert status.is_final is (status.is_failure or value in FINAL_SUCCESS)
    # Exactly one of in progress / success / failure for a known status.
    assert [status.is_in_progress, status.is_success, status.is_failure].count(True) == 1
    assert is_in_progress(status) is (value in IN_PROGRESS)


def test_success_may_still_become_delivered() -> None:
    assert DeploymentStatus.SUCCESS.is_success
    assert not DeploymentStatus.SUCCESS.is_final
    assert DeploymentStatus.DELIVERED.is_final


def test_none_is_in_progress() -> None:
    assert is_in_progress(None) is True


def test_misspelling_is_the_same_member() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the alias is not "unknown"
        alias = DeploymentStatus("PUSH_NOTIFATION")
    assert alias is DeploymentStatus.PUSH_NOTIFICATION
    assert alias.value == "PUSH_NOTIFICATION"
    assert not alias.is_unknown


def test_unknown_status_is_kept_and_warned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Room in the cache whatever other tests left in it.
    monkeypatch.setattr(status_module, "MAX_CACHED_UNKNOWN", status_module._cached_unknown + 10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = DeploymentStatus("FAILURE_BY_SOMETHING_NEW_7f3a")
        second = DeploymentStatus("FAILURE_BY_SOMETHING_NEW_7f3a")
        other = DeploymentStatus("QUEUED_ELSEWHERE_7f3a")
    assert first is second
    assert first.value == "FAILURE_BY_SOMETHING_NEW_7f3a"
    assert str(first) == "FAILURE_BY_SOMETHING_NEW_7f3a"
    assert first.is_unknown
    assert other.is_unknown
    assert other is not first
    assert [str(w.message) for w in caught] == [
        "unknown deployment status 'FAILURE_BY_SOMETHING_NEW_7f3a': kept as an unknown status",
        "unknown deployment status 'QUEUED_ELSEWHERE_7f3a': kept as an unknown status",
    ]
    assert all(issubclass(w.category, RuntimeWarning) for w in caught)
    # Unknown means unclassified: not in progress, not success, not failure, not final.
    assert (first.is_in_progress, first.is_success, first.is_failure, first.is_final) == (
        False,
        False,
        False,
        False,
    )
    assert is_in_progress(first) is False
    assert len(DeploymentStatus) == 30
    assert first not in list(DeploymentStatus)


@pytest.mark.parametrize("value", [None, 5, 1.5, ["RECEIVED"]])
def test_non_text_is_not_a_status(value: object) -> None:
    with pytest.raises(ValueError, match="DeploymentStatus"):
        DeploymentStatus(value)  # type: ignore[arg-type]


def test_unknown_campaign_state_raises() -> None:
    with pytest.raises(ValueError, match="CampaignState"):
        CampaignState("FINISHED")


def test_unknown_statuses_cannot_grow_memory_without_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(status_module, "MAX_CACHED_UNKNOWN", status_module._cached_unknown + 2)
    values = [f"FLOOD_{index}_9c1e" for index in range(5)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        statuses = [DeploymentStatus(value) for value in values]
    assert [status.value for status in statuses] == values
    assert all(status.is_unknown for status in statuses)
    cached = [value for value in values if value in DeploymentStatus._value2member_map_]
    assert cached == values[:2]
    assert len(caught) == 2
    # Beyond the cache, the same text still gives an equal (uncached) status.
    assert DeploymentStatus(values[4]) == values[4]


# -- the vocabulary every screen uses ---------------------------------------------


def test_every_known_status_has_words_and_exactly_one_stage() -> None:
    from campaignkit.status import Stage, stage_of

    for status in DeploymentStatus:
        assert status.description
        assert status.value not in status.description
        expected = (
            Stage.WAITING
            if status.is_in_progress
            else Stage.FAILED
            if status.is_failure
            else Stage.SENT
            if status is DeploymentStatus.SUCCESS
            else Stage.DELIVERED
        )
        assert status.stage is stage_of(status) is expected
    assert stage_of(None) is Stage.WAITING
    # Decided once: a push notification reached the device by another route
    # and no later status comes, so it is delivered (not merely sent).
    assert DeploymentStatus.PUSH_NOTIFICATION.stage is Stage.DELIVERED
    assert {Stage.WAITING} == {s for s in Stage if not s.is_settled}


def test_an_unknown_status_is_unknown_in_words_too() -> None:
    from campaignkit.status import Stage

    with pytest.warns(RuntimeWarning):
        odd = DeploymentStatus("NOT_IN_ANY_TABLE_YET")
    assert odd.stage is Stage.UNKNOWN
    assert "NOT_IN_ANY_TABLE_YET" in odd.description


def test_a_done_request_is_not_described_as_people_done() -> None:
    from campaignkit.status import DONE_MEANS

    assert "may still be on their way" in CampaignState.DONE.description
    assert all(state.description for state in CampaignState)
    assert "not the same as delivered" in DONE_MEANS
