"""Campaign request and deployment statuses, with their classification."""

from __future__ import annotations

import enum
import threading
import warnings

__all__ = ["CampaignState", "DeploymentStatus", "is_in_progress", "status_from_wire"]


class CampaignState(enum.StrEnum):
    """Status of a campaign request (a launch request)."""

    PENDING = "PENDING"
    CLAIMED = "CLAIMED"
    DONE = "DONE"


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


PUSH_NOTIFICATION_MISSPELLING = "PUSH_NOTIFATION"

_IN_PROGRESS = frozenset(
    {DeploymentStatus.RECEIVED, DeploymentStatus.RECEIVED_BY_WORKER, DeploymentStatus.RETRY}
)
_FINAL_SUCCESS = frozenset({DeploymentStatus.DELIVERED, DeploymentStatus.PUSH_NOTIFICATION})
_SUCCESS = _FINAL_SUCCESS | {DeploymentStatus.SUCCESS}
_unknown_lock = threading.Lock()


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
