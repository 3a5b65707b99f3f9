"""Recipients a ledger already holds when a run meets them again: reported
with what the ledger knows, never sent again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

from ..errors import AmbiguousSendError, CampaignKitError
from ..ledger import ACCEPTED, AMBIGUOUS, IN_FLIGHT, Record
from ..models import CampaignAck, User
from ._sender import ClaimOutcome

_HELD_OUTCOME: Final[dict[str, Literal["accepted", "rejected", "ambiguous"]]] = {
    ACCEPTED: "accepted",
    IN_FLIGHT: "ambiguous",
    AMBIGUOUS: "ambiguous",
}
_HELD_WHY: Final = {
    IN_FLIGHT: "were in flight (claimed by an earlier run that stopped, or by another "
    "sender of this run)",
    AMBIGUOUS: "were ambiguous in an earlier run",
}


def held_outcome(
    record: Record, users: Sequence[User], acks: Mapping[str, CampaignAck]
) -> ClaimOutcome:
    """The outcome to report for ``users``, held by the ledger as ``record`` is."""
    outcome = _HELD_OUTCOME.get(record.state, "rejected")
    if outcome == "accepted":
        return ClaimOutcome("accepted", ack=acks.get(record.launch_request_id or ""))
    if outcome == "ambiguous":
        why = _HELD_WHY[record.state] + (f" ({record.detail})" if record.detail else "")
        error = AmbiguousSendError(
            f"these users {why}: they may or may not have reached the service, "
            "and were not resent: check before sending again",
            users=users,
        )
        return ClaimOutcome("ambiguous", error=error)
    return ClaimOutcome(
        "rejected",
        error=CampaignKitError(
            f"rejected in an earlier run ({record.detail or 'rejected'}); not resent: "
            "pass retry_rejected=True to send them again"
        ),
    )


def grouped(records: Sequence[Record]) -> list[list[Record]]:
    """``records`` grouped by the request (claim) and state they share."""
    groups: dict[tuple[str | None, str], list[Record]] = {}
    for record in records:
        groups.setdefault((record.claim, record.state), []).append(record)
    return list(groups.values())
