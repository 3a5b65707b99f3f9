"""The delivery funnel: which stage each deployment status belongs to.

One pure mapping shared by the live page and the HTML report, so both always
show the same numbers for the same counts:

- queued: not yet taken by the runtime (status ``None``);
- taken: in progress (``RECEIVED``, ``RECEIVED_BY_WORKER``, ``RETRY``);
- sent: ``SUCCESS`` (may still become ``DELIVERED``) and ``PUSH_NOTIFICATION``;
- delivered: ``DELIVERED``;
- failed: every failure status (``is_failure``), kept by reason;
- unknown: a status the SDK does not know (neither of the above).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..models import Deployment
from ..status import DeploymentStatus

__all__ = ["PHONES_SHOWN", "Funnel", "Stage", "failed_phones", "funnel", "stage_of"]

PHONES_SHOWN = 50
"""Phones listed under each failure reason (the rest are counted)."""


class Stage(enum.StrEnum):
    """Funnel stages, in the order a deployment goes through them."""

    QUEUED = "queued"
    TAKEN = "taken"
    SENT = "sent"
    DELIVERED = "delivered"
    FAILED = "failed"
    UNKNOWN = "unknown"


def stage_of(status: DeploymentStatus | None) -> Stage:
    """The funnel stage of one deployment status."""
    if status is None:
        return Stage.QUEUED
    if status.is_in_progress:
        return Stage.TAKEN
    if status is DeploymentStatus.DELIVERED:
        return Stage.DELIVERED
    if status.is_success:
        return Stage.SENT
    if status.is_failure:
        return Stage.FAILED
    return Stage.UNKNOWN


@attrs.frozen
class Funnel:
    """Deployments per stage (each in exactly one); ``failures`` holds the
    failed ones by reason (status value), largest first."""

    queued: int = 0
    taken: int = 0
    sent: int = 0
    delivered: int = 0
    unknown: int = 0
    failures: tuple[tuple[str, int], ...] = ()

    @property
    def failed(self) -> int:
        return sum(count for _, count in self.failures)

    @property
    def total(self) -> int:
        return self.queued + self.taken + self.sent + self.delivered + self.unknown + self.failed

    def count(self, stage: Stage) -> int:
        return self.failed if stage is Stage.FAILED else int(getattr(self, stage.value))

    def stages(self) -> list[tuple[Stage, int]]:
        """Every stage with its count, in funnel order."""
        return [(stage, self.count(stage)) for stage in Stage]

    def to_json(self) -> dict[str, Any]:
        return {
            **{stage.value: count for stage, count in self.stages()},
            "total": self.total,
            "failures": dict(self.failures),
        }


def funnel(counts: Mapping[DeploymentStatus | None, int]) -> Funnel:
    """The funnel of deployment counts by status (``tracker.counts``)."""
    stages: Counter[Stage] = Counter()
    failures: Counter[str] = Counter()
    for status, count in counts.items():
        stage = stage_of(status)
        stages[stage] += count
        if stage is Stage.FAILED and status is not None:
            failures[status.value] += count
    return Funnel(
        stages[Stage.QUEUED],
        stages[Stage.TAKEN],
        stages[Stage.SENT],
        stages[Stage.DELIVERED],
        stages[Stage.UNKNOWN],
        tuple(sorted((item for item in failures.items() if item[1]), key=_largest_first)),
    )


def _largest_first(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def failed_phones(
    deployments: Iterable[Deployment], limit: int = PHONES_SHOWN
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The phones behind each failure reason (status value), the first
    ``limit`` of each, reasons in value order."""
    phones: dict[str, list[str]] = {}
    for deployment in deployments:
        status = deployment.status
        if status is not None and stage_of(status) is Stage.FAILED:
            listed = phones.setdefault(status.value, [])
            if len(listed) < limit:
                listed.append(deployment.cellphone)
    return tuple((reason, tuple(listed)) for reason, listed in sorted(phones.items()))
