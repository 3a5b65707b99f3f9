"""The funnel of a bulk run: how far its recipients got, from the ledger's
numbers (its states and the outcomes it learnt), built once here so every
view (``BulkReport.funnel``, ``campaignkit runs``, the dashboard) shows the
same numbers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from .status import Stage, stage_of, status_from_wire

_NOT_RECIPIENTS: Final = ("invalid", "duplicate")
_FOLLOWED_STEPS: Final = ("delivered", "read", "replied", "opted out")

OutcomeGroup = tuple[str | None, bool, bool, bool, bool, int]
"""``(status, delivered, read, replied, opted_out, recipients)``: recipients of
a run's outcomes sharing their last status (its wire value) and which
webhook facts are known of them."""


@attrs.frozen
class Funnel:
    """How far a run's recipients got: planned → accepted → delivered → read →
    replied, and where the others stopped.

    ``planned`` counts the run's recipients (valid, unique inputs);
    ``accepted`` those the service took. Each further step counts those
    known to have reached it or a later one (a reply implies a read, a read
    a delivery): ``delivered`` from a ``DELIVERED``/``PUSH_NOTIFICATION``
    status or a webhook event, ``read``, ``replied`` and ``opted_out`` from
    the webhooks. ``failed`` counts the accepted recipients whose deployment
    ended in a failure, by status (wire value); ``rejected``,
    ``ambiguous``, ``suppressed`` and ``deferred`` are ledger states.
    Steps past ``accepted`` need the outcomes: ``follow=True``,
    ``campaignkit runs RUN --follow`` or a webhook app with ``ledger=``;
    ``followed`` counts the recipients whose outcome the ledger knows (a
    status or a webhook event): with none, those steps are not known, not 0.
    """

    planned: int = 0
    accepted: int = 0
    delivered: int = 0
    read: int = 0
    replied: int = 0
    opted_out: int = 0
    failed: Mapping[str, int] = attrs.field(factory=dict, hash=False)
    rejected: int = 0
    ambiguous: int = 0
    suppressed: int = 0
    deferred: int = 0
    followed: int = 0

    def known(self, step: str) -> bool:
        """Whether the ledger knows the count of ``step`` (a name of
        :meth:`rows`): the steps only outcomes tell are "not followed", not
        0, while ``followed`` is 0."""
        return bool(self.followed) or step not in _FOLLOWED_STEPS

    @property
    def steps(self) -> tuple[tuple[str, int], ...]:
        """``(step, recipients)`` from planned to replied, in order."""
        return (
            ("planned", self.planned),
            ("accepted", self.accepted),
            ("delivered", self.delivered),
            ("read", self.read),
            ("replied", self.replied),
        )

    def rows(self) -> list[tuple[str, int]]:
        """Every number as ``(name, recipients)``: the steps, then each
        failure status, then the states that stopped short of the service."""
        rows = list(self.steps)
        rows.append(("opted out", self.opted_out))
        rows += sorted(((f"failed: {s}", n) for s, n in self.failed.items()), key=_by_count)
        rows += [
            ("rejected", self.rejected),
            ("ambiguous", self.ambiguous),
            ("suppressed", self.suppressed),
            ("deferred", self.deferred),
        ]
        return rows

    def to_json(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "failed": dict(self.failed)}


def _by_count(row: tuple[str, int]) -> tuple[int, str]:
    return -row[1], row[0]


def build_funnel(counts: Mapping[str, int], groups: Iterable[OutcomeGroup]) -> Funnel:
    """The funnel of a run from its ledger ``counts`` (recipients per state)
    and its outcome ``groups``."""
    delivered = read = replied = opted_out = followed = 0
    failed: dict[str, int] = {}
    for raw, was_delivered, was_read, was_replied, was_opted_out, n in groups:
        status = status_from_wire(raw)
        stage = stage_of(status)
        followed += n
        if was_replied:
            replied += n
        if was_replied or was_read:
            read += n
        if was_replied or was_read or was_delivered or stage is Stage.DELIVERED:
            delivered += n
        if was_opted_out:
            opted_out += n
        if status is not None and stage is Stage.FAILED:
            failed[status.value] = failed.get(status.value, 0) + n
    return Funnel(
        # Every recipient state; invalid and duplicate inputs are no recipients.
        planned=sum(n for state, n in counts.items() if state not in _NOT_RECIPIENTS),
        accepted=counts.get("accepted", 0),
        delivered=delivered,
        read=read,
        replied=replied,
        opted_out=opted_out,
        failed=failed,
        rejected=counts.get("rejected", 0),
        ambiguous=counts.get("ambiguous", 0) + counts.get("in_flight", 0),
        suppressed=counts.get("suppressed", 0),
        deferred=counts.get("deferred", 0),
        followed=followed,
    )
