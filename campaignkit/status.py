"""Campaign request and deployment statuses, with their classification, and
the words every screen uses for them (one vocabulary, defined here once).

The stages a person goes through (:class:`Stage`): **waiting** (not sent yet:
not taken, or being sent), **sent** (``SUCCESS``: delivery not yet
confirmed), **delivered** (``DELIVERED``, and ``PUSH_NOTIFICATION``: it
reached the device as a push notification, and no later status comes),
**read** and **replied** (known from the webhooks only), or **failed** (will
not be sent; :attr:`DeploymentStatus.description` says why). A bulk run
also **skips** some inputs on purpose (duplicates, suppressed numbers,
recipients deferred by the daily limit). A status the SDK does not know is
**unknown**.

**Done** means *settled*: out of waiting (sent, delivered, read, replied,
failed or unknown), not "delivered". A campaign request's own state is told
apart from its people's progress: ``DONE`` means the service has taken
every person (:attr:`CampaignState.description`), not that anyone got a
message, so no screen shows it alone beside a count of people.
"""

from __future__ import annotations

import enum
import threading
import warnings

__all__ = [
    "DONE_MEANS",
    "CampaignState",
    "DeploymentStatus",
    "Stage",
    "is_in_progress",
    "stage_of",
    "status_from_wire",
]


class CampaignState(enum.StrEnum):
    """Status of a campaign request (a launch request)."""

    PENDING = "PENDING"
    CLAIMED = "CLAIMED"
    DONE = "DONE"

    @property
    def description(self) -> str:
        """The state in words: what the service has done with the request (not
        with its people's messages)."""
        return _CAMPAIGN_WORDS[self]


_CAMPAIGN_WORDS = {
    CampaignState.PENDING: "queued at the service",
    CampaignState.CLAIMED: "being taken by the service",
    CampaignState.DONE: "taken in full by the service (messages may still be on their way)",
}


class Stage(enum.StrEnum):
    """The stages a person goes through, in order, in the words every screen
    shows: ``str(stage)`` is the word, :attr:`description` the sentence."""

    WAITING = "waiting"
    SENT = "sent"
    DELIVERED = "delivered"
    READ = "read"
    REPLIED = "replied"
    FAILED = "failed"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"

    @property
    def description(self) -> str:
        return _STAGE_WORDS[self]

    @property
    def is_settled(self) -> bool:
        """Out of waiting: what "done" counts."""
        return self is not Stage.WAITING


_STAGE_WORDS = {
    Stage.WAITING: "not sent yet: waiting for the service, or being sent",
    Stage.SENT: "sent; the messaging network has not confirmed delivery yet",
    Stage.DELIVERED: "delivered to the person's device (or as a push notification)",
    Stage.READ: "read by the person (from the webhooks)",
    Stage.REPLIED: "the person replied (from the webhooks)",
    Stage.FAILED: "will not be sent (see the reason)",
    Stage.SKIPPED: "not sent on purpose: a duplicate, suppressed, or deferred to a later run",
    Stage.UNKNOWN: "a status this version of campaignkit does not know",
}

DONE_MEANS = (
    "done: settled, no longer waiting (sent, delivered, read, replied, failed, skipped or "
    "unknown); "
    "not the same as delivered"
)
"""What "done" means on every screen."""


class DeploymentStatus(enum.StrEnum):
    """Delivery status of one user's deployment, in the spec's table order.

    The wire misspelling ``PUSH_NOTIFATION`` is the same member as
    ``PUSH_NOTIFICATION``. A value the SDK does not know never raises: it
    becomes an unknown status that keeps the raw text as its ``value``
    (``is_unknown`` is true) and is warned about once per value (for the first
    :data:`MAX_CACHED_UNKNOWN` distinct values).
    """

    RECEIVED = "RECEIVED"
    RECEIVED_BY_WORKER = "RECEIVED_BY_WORKER"
    RETRY = "RETRY"
    SUCCESS = "SUCCESS"
    DELIVERED = "DELIVERED"
    PUSH_NOTIFICATION = "PUSH_NOTIFICATION"
    REVOKED = "REVOKED"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    INVALID_PHONE = "INVALID_PHONE"
    INVALID_POLL = "INVALID_POLL"
    MISSING_PARAMETER = "MISSING_PARAMETER"
    PARAMETER_MISMATCH = "PARAMETER_MISMATCH"
    CHARACTER_LIMIT_HEADER = "CHARACTER_LIMIT_HEADER"
    CHARACTER_LIMIT_BODY = "CHARACTER_LIMIT_BODY"
    FAILURE = "FAILURE"
    FAILURE_BY_HUMAN_HANDOVER = "FAILURE_BY_HUMAN_HANDOVER"
    FAILURE_BY_RATE_LIMIT = "FAILURE_BY_RATE_LIMIT"
    COMPANY_RATE_LIMIT = "COMPANY_RATE_LIMIT"
    FAILURE_BY_TIER_CAPACITY = "FAILURE_BY_TIER_CAPACITY"
    FAILURE_BY_BLOCKED_CONTACT = "FAILURE_BY_BLOCKED_CONTACT"
    FAILURE_BY_OPTOUT_CONTACT = "FAILURE_BY_OPTOUT_CONTACT"
    FAILURE_BY_DISABLED_HSM = "FAILURE_BY_DISABLED_HSM"
    FAILURE_BY_SPAM_RATE_LIMIT = "FAILURE_BY_SPAM_RATE_LIMIT"
    FAILURE_BY_EXPERIMENT_NUMBER = "FAILURE_BY_EXPERIMENT_NUMBER"
    FAILURE_BY_META_CHOSE_NOT_DELIVER = "FAILURE_BY_META_CHOSE_NOT_DELIVER"
    FAILURE_BY_TEST_CHANNEL = "FAILURE_BY_TEST_CHANNEL"
    FAILURE_BY_MEDIA_UPLOAD_ERROR = "FAILURE_BY_MEDIA_UPLOAD_ERROR"
    FAILURE_BY_DEPLOYMENT_LIMIT_REACHED = "FAILURE_BY_DEPLOYMENT_LIMIT_REACHED"
    FAILURE_BY_UNABLE_TO_CONTACT = "FAILURE_BY_UNABLE_TO_CONTACT"
    FAILURE_BY_PAYMENT_ISSUE = "FAILURE_BY_PAYMENT_ISSUE"

    @classmethod
    def _missing_(cls, value: object) -> DeploymentStatus | None:
        if not isinstance(value, str):
            return None
        if value == PUSH_NOTIFICATION_MISSPELLING:
            return cls.PUSH_NOTIFICATION
        return _unknown_status(cls, value)

    @property
    def is_unknown(self) -> bool:
        """A value the SDK does not know; ``value`` holds its raw text."""
        return self._name_ not in type(self).__members__

    @property
    def is_in_progress(self) -> bool:
        """Not yet sent: ``RECEIVED``, ``RECEIVED_BY_WORKER`` or ``RETRY``."""
        return self in _IN_PROGRESS

    @property
    def is_success(self) -> bool:
        """Sent: ``SUCCESS`` (may still become ``DELIVERED``), ``DELIVERED``,
        ``PUSH_NOTIFICATION``."""
        return self in _SUCCESS

    @property
    def is_failure(self) -> bool:
        """Will not be sent: ``REVOKED`` and every error and ``FAILURE*`` status."""
        return not (self.is_unknown or self in _IN_PROGRESS or self in _SUCCESS)

    @property
    def is_final(self) -> bool:
        """No further move is expected: every failure, ``DELIVERED`` and
        ``PUSH_NOTIFICATION``. ``SUCCESS`` is not final."""
        return self.is_failure or self in _FINAL_SUCCESS

    @property
    def stage(self) -> Stage:
        """The person's :class:`Stage` for this status."""
        return stage_of(self)

    @property
    def description(self) -> str:
        """The status in words (a failure says why)."""
        if self.is_unknown:
            return f"{_STAGE_WORDS[Stage.UNKNOWN]} ({self.value})"
        return _STATUS_WORDS[self]


PUSH_NOTIFICATION_MISSPELLING = "PUSH_NOTIFATION"

_IN_PROGRESS = frozenset(
    {DeploymentStatus.RECEIVED, DeploymentStatus.RECEIVED_BY_WORKER, DeploymentStatus.RETRY}
)
_FINAL_SUCCESS = frozenset({DeploymentStatus.DELIVERED, DeploymentStatus.PUSH_NOTIFICATION})
_SUCCESS = _FINAL_SUCCESS | {DeploymentStatus.SUCCESS}
_unknown_lock = threading.Lock()

_S = DeploymentStatus
_STATUS_WORDS = {
    _S.RECEIVED: "received by the service, about to be sent",
    _S.RECEIVED_BY_WORKER: "being sent by the service",
    _S.RETRY: "a passing failure: the service is trying again",
    _S.SUCCESS: "sent; delivery not confirmed yet",
    _S.DELIVERED: "delivered to the person's device",
    _S.PUSH_NOTIFICATION: "delivered as a push notification instead of a network message",
    _S.REVOKED: "cancelled before sending",
    _S.VALIDATION_ERROR: "the deployment's data failed the service's validation",
    _S.INVALID_PHONE: "the number is invalid or has no account on the messaging network",
    _S.INVALID_POLL: "the conversation to send was deleted or deactivated",
    _S.MISSING_PARAMETER: "a variable the message template needs is missing",
    _S.PARAMETER_MISMATCH: "the number of variables sent differs from the template's",
    _S.CHARACTER_LIMIT_HEADER: "the template's header is over the network's character limit",
    _S.CHARACTER_LIMIT_BODY: "the template's body is over the network's character limit",
    _S.FAILURE: "failed after 3 retries",
    _S.FAILURE_BY_HUMAN_HANDOVER: "the person is talking to an agent: no automatic message",
    _S.FAILURE_BY_RATE_LIMIT: "sending would have exceeded the network's sending limit",
    _S.COMPANY_RATE_LIMIT: "over the session limit your company configured",
    _S.FAILURE_BY_TIER_CAPACITY: "no sending line had capacity left",
    _S.FAILURE_BY_BLOCKED_CONTACT: "the contact is blocked by your company",
    _S.FAILURE_BY_OPTOUT_CONTACT: "the person opted out of messages",
    _S.FAILURE_BY_DISABLED_HSM: "the network operator disabled the message template",
    _S.FAILURE_BY_SPAM_RATE_LIMIT: "the network restricted the line for spam; it cannot send now",
    _S.FAILURE_BY_EXPERIMENT_NUMBER: "the network uses that number for its experiments",
    _S.FAILURE_BY_META_CHOSE_NOT_DELIVER: "the network operator chose not to deliver it",
    _S.FAILURE_BY_TEST_CHANNEL: "the line is a test channel and cannot send to real people",
    _S.FAILURE_BY_MEDIA_UPLOAD_ERROR: "the attached media failed to upload to the network",
    _S.FAILURE_BY_DEPLOYMENT_LIMIT_REACHED: "your company reached its deployment limit",
    _S.FAILURE_BY_UNABLE_TO_CONTACT: "the network could not reach the device (often temporary)",
    _S.FAILURE_BY_PAYMENT_ISSUE: "the operator refused the send: a payment problem on the account",
}


MAX_CACHED_UNKNOWN = 256
"""Distinct unknown values kept (and warned about once each); beyond this a
misbehaving service cannot grow memory: further values are built afresh and
not warned about."""
_cached_unknown = 0


def _unknown_status(cls: type[DeploymentStatus], value: str) -> DeploymentStatus:
    # Enum looks values up in _value2member_map_ before calling _missing_, so
    # caching the pseudo-member there makes each unknown value warn only once.
    global _cached_unknown
    member = str.__new__(cls, value)
    member._name_ = value
    member._value_ = value
    with _unknown_lock:
        existing = cls._value2member_map_.get(value)
        if isinstance(existing, cls):
            return existing
        if _cached_unknown >= MAX_CACHED_UNKNOWN:
            return member
        _cached_unknown += 1
        cls._value2member_map_[value] = member
    warnings.warn(
        f"unknown deployment status {value!r}: kept as an unknown status",
        RuntimeWarning,
        stacklevel=3,
    )
    return member


# Wire text to member for the known values, the misspelling and null: a dict
# lookup, cheaper than the enum's own, for the hot paths that read every
# deployment (decoding, the tracker's diff).
KNOWN_WIRE_STATUSES: dict[str | None, DeploymentStatus | None] = {
    **{status.value: status for status in DeploymentStatus},
    PUSH_NOTIFICATION_MISSPELLING: DeploymentStatus.PUSH_NOTIFICATION,
    None: None,
}


def status_from_wire(raw: str | None) -> DeploymentStatus | None:
    """The status for a wire value; an unknown text becomes an unknown status."""
    if raw is None:
        return None
    known = KNOWN_WIRE_STATUSES.get(raw)
    return known if known is not None else DeploymentStatus(raw)


def is_in_progress(status: DeploymentStatus | None) -> bool:
    """True while a deployment is not yet taken (``None``) or not yet sent."""
    return status is None or status.is_in_progress


def stage_of(status: DeploymentStatus | None) -> Stage:
    """The person's :class:`Stage` for a deployment status (``None``: not
    taken yet, so waiting)."""
    if status is None or status in _IN_PROGRESS:
        return Stage.WAITING
    if status in _FINAL_SUCCESS:
        return Stage.DELIVERED
    if status is DeploymentStatus.SUCCESS:
        return Stage.SENT
    return Stage.UNKNOWN if status.is_unknown else Stage.FAILED
