"""What the pages call things: each funnel stage's legend and each failure
status in words (the service's own descriptions)."""

from __future__ import annotations

from ..status import DeploymentStatus
from ._funnel import Stage

__all__ = ["LEGEND", "reason_words"]

S = DeploymentStatus

LEGEND: dict[Stage, str] = {
    Stage.QUEUED: "not yet taken by the service",
    Stage.TAKEN: "being sent (received, with a worker, or retrying)",
    Stage.SENT: "sent, not yet confirmed on the phone",
    Stage.DELIVERED: "confirmed on the phone",
    Stage.FAILED: "will not be sent (see the reasons below)",
    Stage.UNKNOWN: "a status this version of campaignkit does not know",
}

_REASONS: dict[DeploymentStatus, str] = {
    S.REVOKED: "cancelled before sending",
    S.VALIDATION_ERROR: "the deployment's data failed validation",
    S.INVALID_PHONE: "the number is invalid or has no account on the messaging network",
    S.INVALID_POLL: "the conversation was deleted or deactivated",
    S.MISSING_PARAMETER: "a variable of the message template is missing",
    S.PARAMETER_MISMATCH: "the number of variables differs from the template's",
    S.CHARACTER_LIMIT_HEADER: "the template header is over the network's character limit",
    S.CHARACTER_LIMIT_BODY: "the template body is over the network's character limit",
    S.FAILURE: "failed after 3 retries",
    S.FAILURE_BY_HUMAN_HANDOVER: "the user was talking to an agent",
    S.FAILURE_BY_RATE_LIMIT: "the network's sending limit was reached",
    S.COMPANY_RATE_LIMIT: "the company's session limit was reached",
    S.FAILURE_BY_TIER_CAPACITY: "no sending line had capacity",
    S.FAILURE_BY_BLOCKED_CONTACT: "the contact is blocked by the company",
    S.FAILURE_BY_OPTOUT_CONTACT: "the contact opted out",
    S.FAILURE_BY_DISABLED_HSM: "the network disabled the template",
    S.FAILURE_BY_SPAM_RATE_LIMIT: "the network restricted the line for spam",
    S.FAILURE_BY_EXPERIMENT_NUMBER: "the network keeps that number for experiments",
    S.FAILURE_BY_META_CHOSE_NOT_DELIVER: "the network chose not to deliver",
    S.FAILURE_BY_TEST_CHANNEL: "the line is a test channel",
    S.FAILURE_BY_MEDIA_UPLOAD_ERROR: "the attached media failed to upload",
    S.FAILURE_BY_DEPLOYMENT_LIMIT_REACHED: "the company's deployment limit was reached",
    S.FAILURE_BY_UNABLE_TO_CONTACT: "the phone could not be reached (usually temporary)",
    S.FAILURE_BY_PAYMENT_ISSUE: "a payment problem on the business account",
}


def reason_words(reason: str) -> str:
    """A failure status (its wire value) in words; an unknown one as is."""
    return _REASONS.get(DeploymentStatus(reason), reason)
