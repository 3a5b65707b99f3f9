"""A launch's deployments per stage (:class:`LaunchStages`), rolled up by
:func:`~campaignkit.status.stage_of`, the one classification the CLI and the
bots use too. (A bulk run's funnel, planned → accepted → delivered → read →
replied, is :class:`campaignkit.Funnel`.)

One pure mapping shared by the live page and the HTML report, so both always
show the same numbers for the same counts: **waiting** (not taken, or being
sent), **sent** (``SUCCESS``: delivery not confirmed yet), **delivered**
(``DELIVERED``, ``PUSH_NOTIFICATION``), **failed** (kept by reason) and
**unknown** (a status the SDK does not know). Read and replied are known
from the webhooks only; skipped belongs to a bulk run's inputs.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ..status import DeploymentStatus, Stage, stage_of

__all__ = [
    "PHONES_SHOWN",
    "STAGES",
    "LaunchStages",
    "Stage",
    "failed_phones",
    "launch_stages",
    "stage_of",
]

STAGES = (Stage.WAITING, Stage.SENT, Stage.DELIVERED, Stage.FAILED, Stage.UNKNOWN)
"""The stages a launch's status can tell, in order."""

_FIELDS = {stage: stage.value for stage in Stage}
# The chart counts every stage of every sample: a dict lookup, not the enum's .value.

PHONES_SHOWN = 50
"""Phones listed under each failure reason (the rest are counted)."""


@attrs.frozen
class LaunchStages:
    """A launch's deployments per stage (each in exactly one); ``failures``
    holds the failed ones by reason (status value), largest first."""

    waiting: int = 0
    sent: int = 0
    delivered: int = 0
    unknown: int = 0
    failures: tuple[tuple[str, int], ...] = ()

    @property
    def failed(self) -> int:
        return sum(count for _, count in self.failures)

    @property
    def total(self) -> int:
        return self.waiting + self.sent + self.delivered + self.unknown + self.failed

    @property
    def done(self) -> int:
        """Settled: out of waiting (not the same as delivered)."""
        return self.total - self.waiting

    def count(self, stage: Stage) -> int:
        """The deployments at ``stage`` (0 for read, replied, skipped: a
        launch's status does not tell them)."""
        return self.failed if stage is Stage.FAILED else int(getattr(self, _FIELDS[stage], 0))

    def items(self) -> list[tuple[Stage, int]]:
        """Every stage of :data:`STAGES` with its count, in order."""
        return [(stage, self.count(stage)) for stage in STAGES]

    def stages(self) -> list[tuple[Stage, int]]:
        """Deprecated: :meth:`items`."""
        warnings.warn(
            "LaunchStages.stages() is deprecated: use LaunchStages.items()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.items()

    def to_json(self) -> dict[str, Any]:
        return {
            **{stage.value: count for stage, count in self.items()},
            "total": self.total,
            "done": self.done,
            "failures": dict(self.failures),
        }


def launch_stages(counts: Mapping[DeploymentStatus | None, int]) -> LaunchStages:
    """The stages of deployment counts by status (``tracker.counts``)."""
    stages: Counter[Stage] = Counter()
    failures: Counter[str] = Counter()
    for status, count in counts.items():
        stage = stage_of(status)
        stages[stage] += count
        if stage is Stage.FAILED and status is not None:
            failures[status.value] += count
    return LaunchStages(
        stages[Stage.WAITING],
        stages[Stage.SENT],
        stages[Stage.DELIVERED],
        stages[Stage.UNKNOWN],
        tuple(sorted((item for item in failures.items() if item[1]), key=_largest_first)),
    )


def _largest_first(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def failed_phones(
    statuses: Iterable[tuple[str, DeploymentStatus | None]], limit: int = PHONES_SHOWN
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The phones behind each failure reason (status value), the first
    ``limit`` of each, reasons in value order, from ``(phone, status)``
    pairs: a launch's deployments, or a run's outcomes in the ledger."""
    phones: dict[str, list[str]] = {}
    for phone, status in statuses:
        if status is not None and stage_of(status) is Stage.FAILED:
            listed = phones.setdefault(status.value, [])
            if len(listed) < limit:
                listed.append(phone)
    return tuple((reason, tuple(listed)) for reason, listed in sorted(phones.items()))
