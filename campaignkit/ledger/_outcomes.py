"""What became of each recipient after the service accepted it: the last
status of its deployment (from tracking) and the webhook facts (delivered,
read, replied, opted out), as every ledger keeps them."""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, NamedTuple

import attrs

from .._input.phones import read_phone
from ..errors import ValidationError
from ..status import KNOWN_WIRE_STATUSES, DeploymentStatus, status_from_wire

if TYPE_CHECKING:
    from ..webhooks import WebhookEvent

# The webhook event kinds (``EventKind`` values) a ledger records, and the
# time each one sets; the others (timeouts, conditions, ...) say nothing of
# how far a person got.
OUTCOME_COLUMNS: Final = (
    "phone, launch_request_id, conversation_id, status, status_at,"
    " delivered_at, read_at, replied_at, answer, opted_out_at"
)
# A status replaces the one held only when it differs: following a launch
# again (after an interruption) sees the same statuses, and keeps their times.
STATUS_UPSERT: Final = (
    "INSERT INTO campaignkit_outcomes"
    " (run, phone, launch_request_id, conversation_id, status, status_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (run, phone) DO UPDATE SET launch_request_id = excluded.launch_request_id,"
    " conversation_id = excluded.conversation_id, status = excluded.status,"
    " status_at = excluded.status_at"
    " WHERE campaignkit_outcomes.status IS NULL"
    " OR campaignkit_outcomes.status <> excluded.status"
)

FACTS: Final = {
    "delivered": "delivered_at",
    "read": "read_at",
    "response": "replied_at",
    "opt_out": "opted_out_at",
}


class StatusRow(NamedTuple):
    """A deployment's status as tracking saw it, for its recipient ``phone``."""

    phone: str
    launch_request_id: str
    conversation_id: str | None
    status: str
    """The wire value."""
    at: float
    """When it was observed (UNIX seconds)."""


class EventFact(NamedTuple):
    """What one webhook event tells of its recipient (see :func:`fact_of`)."""

    phone: str
    fact: str
    """The time column it sets (a value of :data:`FACTS`)."""
    at: float
    conversation_id: str | None
    answer: str | None


def fact_of(event: WebhookEvent) -> EventFact | None:
    """The fact ``event`` records, or None for a kind a ledger does not
    record or an event without a phone."""
    fact = FACTS.get(event.kind.value)
    if fact is None or not event.country_code or not event.cellphone:
        return None
    code = event.country_code.strip()
    code = code if code.startswith("+") else "+" + code
    cellphone = "".join(char for char in event.cellphone if char.isdigit())
    phone = read_phone(code, cellphone)
    # A number no country has is nobody's the ledger sent to: kept as written.
    key = code + cellphone if isinstance(phone, str) else phone.key
    at = time.time() if event.occurred_at is None else event.occurred_at.timestamp()
    answer = event.answer if fact == "replied_at" else None
    return EventFact(key, fact, at, event.conversation_id, answer)


def failure_statuses(statuses: Iterable[DeploymentStatus | str]) -> frozenset[DeploymentStatus]:
    """``statuses`` (members or their names) as failure statuses; anything
    else is a :class:`ValidationError` naming the field."""
    if isinstance(statuses, str):
        statuses = [statuses]
    chosen: set[DeploymentStatus] = set()
    for given in statuses:
        status = given if isinstance(given, DeploymentStatus) else KNOWN_WIRE_STATUSES.get(given)
        if status is None or not status.is_failure:
            raise ValidationError(
                [
                    (
                        "statuses",
                        f"{given!r} is not a failure status (e.g. FAILURE_BY_UNABLE_TO_CONTACT)",
                    )
                ]
            )
        chosen.add(status)
    if not chosen:
        raise ValidationError([("statuses", "name at least one failure status")])
    return frozenset(chosen)


def _when(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


@attrs.frozen
class RecipientOutcome:
    """What became of one accepted recipient of a run.

    ``status`` is the last :class:`DeploymentStatus` tracking saw (None until
    a status was seen), at ``status_at``; the other times come from the
    webhooks (the first event of each kind); ``answer`` is the text of the
    first reply.
    """

    phone: str
    launch_request_id: str | None = None
    conversation_id: str | None = None
    status: DeploymentStatus | None = None
    status_at: datetime | None = None
    delivered_at: datetime | None = None
    read_at: datetime | None = None
    replied_at: datetime | None = None
    answer: str | None = attrs.field(default=None, repr=False)
    opted_out_at: datetime | None = None

    @classmethod
    def of_row(
        cls,
        phone: str,
        launch_request_id: str | None,
        conversation_id: str | None,
        status: str | None,
        status_at: float | None,
        delivered_at: float | None,
        read_at: float | None,
        replied_at: float | None,
        answer: str | None,
        opted_out_at: float | None,
    ) -> RecipientOutcome:
        """From the columns a ledger keeps (times in UNIX seconds)."""
        return cls(
            phone,
            launch_request_id,
            conversation_id,
            status_from_wire(status),
            _when(status_at),
            _when(delivered_at),
            _when(read_at),
            _when(replied_at),
            answer,
            _when(opted_out_at),
        )


OUTCOME_TABLES: Final = (
    # One row per accepted recipient whose outcome is known, beside (never in)
    # the recipients' table: ledgers of earlier releases open unchanged.
    """CREATE TABLE IF NOT EXISTS campaignkit_outcomes (
        run TEXT NOT NULL,
        phone TEXT NOT NULL,
        launch_request_id TEXT,
        conversation_id TEXT,
        status TEXT,
        status_at DOUBLE PRECISION,
        delivered_at DOUBLE PRECISION,
        read_at DOUBLE PRECISION,
        replied_at DOUBLE PRECISION,
        answer TEXT,
        opted_out_at DOUBLE PRECISION,
        PRIMARY KEY (run, phone)
    )""",
    # The launches followed until every deployment was final: not tracked again.
    """CREATE TABLE IF NOT EXISTS campaignkit_followed (
        run TEXT NOT NULL,
        launch_request_id TEXT NOT NULL,
        final_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (run, launch_request_id)
    )""",
)
