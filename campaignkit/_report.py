"""What became of every input of a bulk send: the records of a
:class:`BulkReport`, built by ``send_bulk`` as it goes or read back from a
delivery ledger."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Literal

import attrs

from ._funnel import Funnel
from .errors import CampaignKitError
from .models import CampaignAck, User

Outcome = Literal[
    "accepted", "rejected", "ambiguous", "deferred", "invalid", "duplicate", "suppressed"
]
OUTCOMES: Final = (
    "accepted",
    "rejected",
    "ambiguous",
    "deferred",
    "invalid",
    "duplicate",
    "suppressed",
)


DAILY_LIMIT: Final = "daily limit"
"""Deferred: over the run's ``daily_limit``; a rerun sends it once the budget allows."""
ZONE_UNKNOWN: Final = "zone unknown"
"""Deferred: a send window, and no zone to hold it in (the number's is
unknown, or its zones share no hour of the window): give it a ``tz``."""

COOLDOWN: Final = "cooldown"
"""Deferred: the ledger's runs sent this person a template within the run's
``cooldown`` and they have not replied since; a rerun sends them once it
has passed."""
OPEN_CONVERSATION: Final = "open conversation"
"""Deferred: the person answered within the last 24 h (``skip_open_conversations``)."""
PAUSED: Final = "paused"
"""Not sent yet: the run is paused (a guard's figures, or by hand); resuming it sends them."""

_REASON = re.compile(r"deferred \(([^)]+)\)")


def deferral_detail(reason: str, why: str) -> str:
    """The ledger detail of a recipient deferred for ``reason``."""
    return f"deferred ({reason}): {why}"


def deferral_reason(detail: str | None) -> str:
    """The reason a :func:`deferral_detail` names. Ledgers written before
    reasons were named hold only the daily limit's deferrals."""
    found = _REASON.match(detail or "")
    return DAILY_LIMIT if found is None else found[1]


@attrs.frozen
class InvalidUser:
    """An input that was not sent: its 0-based input ``position`` and why."""

    position: int
    reason: str
    row: int | None = None
    value: Any = attrs.field(default=None, repr=False, eq=False)
    """The input item as given (a User, a dict or an :class:`InvalidInput`)."""


@attrs.frozen
class DuplicateUser:
    """A user not sent because its phone came earlier in the input."""

    position: int
    phone: str
    user: User = attrs.field(repr=False, eq=False)


@attrs.frozen
class SuppressedUser:
    """A user not sent because its phone is on the ledger's suppression list
    (``reason``: why it is there)."""

    position: int
    phone: str
    reason: str
    user: User = attrs.field(repr=False, eq=False)


@attrs.frozen
class BulkChunk:
    """One chunk of users and what became of it.

    ``chunk_id`` names the request in the ledger (its claim), when there is
    one; ``positions`` are the input positions of its users; ``users`` is
    None for accepted chunks unless ``keep_accepted_users``. ``resumed``
    marks an outcome the ledger already held (from an earlier run, or
    another worker of this one): those users were not sent by this call.
    """

    index: int
    chunk_id: str | None = attrs.field(repr=lambda v: (v or "")[:12])
    outcome: Literal["accepted", "rejected", "ambiguous", "deferred"]
    size: int
    ack: CampaignAck | None = None
    error: CampaignKitError | None = attrs.field(default=None, repr=False)
    resumed: bool = False
    positions: Sequence[int] = attrs.field(factory=tuple, repr=False, eq=False)
    users: tuple[User, ...] | None = attrs.field(default=None, repr=False, eq=False)


@attrs.define(repr=False)
class BulkReport:
    """Where every input of a :func:`send_bulk` call ended up.

    ``accepted``, ``rejected`` and ``ambiguous`` are chunks (in input order);
    ``invalid``, ``duplicates`` and ``suppressed`` (phones on the ledger's
    suppression list) are single inputs. ``total`` counts every input read;
    ``elapsed`` is in seconds.
    """

    poll_id: str
    accepted: list[BulkChunk] = attrs.Factory(list)
    rejected: list[BulkChunk] = attrs.Factory(list)
    ambiguous: list[BulkChunk] = attrs.Factory(list)
    deferred: list[BulkChunk] = attrs.Factory(list)
    """Users not sent for now, each chunk for one reason (its error says
    which: :attr:`deferred_reasons`): over the daily limit
    (``daily_limit=``), or with no zone to hold the send window in; a
    rerun sends them once the budget allows, or once they have a zone."""
    invalid: list[InvalidUser] = attrs.Factory(list)
    duplicates: list[DuplicateUser] = attrs.Factory(list)
    suppressed: list[SuppressedUser] = attrs.Factory(list)
    total: int = 0
    elapsed: float = 0.0
    keeps_accepted_users: bool = False
    fatal: CampaignKitError | None = None
    """The answer that ended the run early (a 401, a 404 for the poll, or a
    400 refusing the request as a whole rather than one of its users):
    every input read was sent before it or is ``rejected`` with it; the input
    after the first ``total`` items was not read (and a ledger does not mark
    the run's input finished)."""
    funnel: Funnel | None = None
    """How far the run's recipients got (planned → accepted → delivered →
    read → replied, failures by status), read from its ledger when the
    report was made: with ``follow=True``, once every launch has settled."""
    paused: str | None = None
    """Why the run is paused, if it is (``<reason>: <figures>``): its
    recipients not sent yet are deferred with the reason ``paused`` until
    it is resumed (``ledger.resume_run(run)``, ``campaignkit runs RUN --resume``)."""
    lines: dict[str, int] = attrs.Factory(dict)
    """A dry run's share of each sending line (``lines=``): how many of the
    recipients it would send go through each, new people spread as the run
    would spread them, the others kept on their line (those with a
    ``deployment_squad`` of their own are not counted). Empty otherwise."""

    @property
    def acks(self) -> list[CampaignAck]:
        """The acknowledgements of the accepted chunks (for ``client.track_many``)."""
        return [chunk.ack for chunk in self.accepted if chunk.ack is not None]

    @property
    def launch_request_ids(self) -> list[str]:
        return [ack.launch_request_id for ack in self.acks]

    @property
    def counts(self) -> dict[str, int]:
        """Users per outcome; they add up to ``total``."""
        return {
            "accepted": sum(chunk.size for chunk in self.accepted),
            "rejected": sum(chunk.size for chunk in self.rejected),
            "ambiguous": sum(chunk.size for chunk in self.ambiguous),
            "deferred": sum(chunk.size for chunk in self.deferred),
            "invalid": len(self.invalid),
            "duplicate": len(self.duplicates),
            "suppressed": len(self.suppressed),
        }

    @property
    def deferred_reasons(self) -> dict[str, int]:
        """Deferred users per reason (``daily limit``, ``zone unknown``)."""
        counts: dict[str, int] = {}
        for chunk in self.deferred:
            reason = deferral_reason(None if chunk.error is None else str(chunk.error))
            counts[reason] = counts.get(reason, 0) + chunk.size
        return counts

    @property
    def complete(self) -> bool:
        """Whether every valid, unique user is known to be accepted."""
        return not self.rejected and not self.ambiguous and not self.deferred

    def users_for(self, outcome: Outcome) -> list[Any]:
        """The inputs of one outcome, in input order, for a deliberate retry.

        ``"invalid"`` gives the items as they were given (Users, dicts, or
        :class:`InvalidInput`); the others give :class:`User` objects.
        ``"accepted"`` needs ``send_bulk(..., keep_accepted_users=True)``.
        """
        if outcome == "invalid":
            return [item.value for item in self.invalid]
        if outcome == "duplicate":
            return [item.user for item in self.duplicates]
        if outcome == "suppressed":
            return [item.user for item in self.suppressed]
        if outcome not in ("accepted", "rejected", "ambiguous", "deferred"):
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        if outcome == "accepted" and not self.keeps_accepted_users:
            raise ValueError(
                "accepted users are not kept (to save memory): "
                "pass keep_accepted_users=True to send_bulk"
            )
        chunks: list[BulkChunk] = getattr(self, outcome)
        return [user for chunk in chunks for user in (chunk.users or ())]

    def __repr__(self) -> str:
        counts = self.counts
        return (
            f"<BulkReport poll_id={self.poll_id!r} total={self.total} "
            f"accepted={counts['accepted']} ({len(self.accepted)} chunks) "
            f"rejected={counts['rejected']} ({len(self.rejected)} chunks) "
            f"ambiguous={counts['ambiguous']} ({len(self.ambiguous)} chunks) "
            f"deferred={counts['deferred']} "
            f"invalid={counts['invalid']} duplicate={counts['duplicate']} "
            f"suppressed={counts['suppressed']} "
            f"elapsed={self.elapsed:.2f}s>"
        )
