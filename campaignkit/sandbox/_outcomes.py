"""Deterministic deployment outcomes, chosen by the last digits of the cellphone.

A cellphone ending in ``99NN`` (NN from 00 to 29) ends in status NN of the
spec's table (``list(DeploymentStatus)[NN]``); any other number is delivered.
Each outcome is a path of statuses, each held for a number of steps; a
deployment's status is a pure function of (taken_at, path, now), so nothing
ticks per deployment.
"""

from __future__ import annotations

import attrs

from ..status import PUSH_NOTIFICATION_MISSPELLING, DeploymentStatus

__all__ = [
    "DEFAULT_OUTCOME",
    "INVALID_PHONE",
    "OUTCOMES",
    "SENT",
    "VALIDATION_ERROR",
    "Outcome",
    "outcome_for",
    "wire",
]

S = DeploymentStatus
STATUSES: tuple[DeploymentStatus, ...] = tuple(S)
RETRIES_BEFORE_FAILURE = 3


def wire(status: DeploymentStatus) -> str:
    """The status as the service writes it (``PUSH_NOTIFATION``, misspelt)."""
    if status is S.PUSH_NOTIFICATION:
        return PUSH_NOTIFICATION_MISSPELLING
    return status.value


@attrs.frozen
class Outcome:
    """A path of ``(status, steps held)``; the last status is held for good."""

    steps: tuple[tuple[DeploymentStatus, int], ...]
    timeline: tuple[str, ...] = attrs.field(init=False)

    @timeline.default
    def _timeline(self) -> tuple[str, ...]:
        # One wire value per elapsed step: status lookup is a tuple index.
        return tuple(wire(status) for status, held in self.steps for _ in range(held))

    @property
    def final(self) -> DeploymentStatus:
        return self.steps[-1][0]

    def status_at(self, elapsed_steps: float) -> str | None:
        if elapsed_steps < 0:
            return None
        index = int(elapsed_steps)
        timeline = self.timeline
        return timeline[index] if index < len(timeline) else timeline[-1]

    def history(self, taken_at: float, step: float, now: float) -> list[tuple[str, float]]:
        """The ``(wire status, sandbox time)`` changes that happened by ``now``."""
        changes: list[tuple[str, float]] = []
        at = taken_at
        for status, held in self.steps:
            if at > now:
                break
            changes.append((wire(status), at))
            at += held * step
        return changes

    def delivered_at(self, taken_at: float, step: float) -> float | None:
        """When the user last got news of the message (the last sent status)."""
        sent = [at for status, at in self.history(taken_at, step, float("inf")) if status in SENT]
        return sent[-1] if sent else None


SENT = frozenset(wire(s) for s in (S.SUCCESS, S.DELIVERED, S.PUSH_NOTIFICATION))
"""Wire statuses after which the user has the message and may answer it."""


def _path(*statuses: DeploymentStatus) -> Outcome:
    return Outcome(tuple((status, 1) for status in statuses))


_R, _W = S.RECEIVED, S.RECEIVED_BY_WORKER
# Statuses reached without a worker: cancelled or refused at reception.
_AT_RECEPTION = frozenset({S.REVOKED, S.VALIDATION_ERROR, S.INVALID_POLL})


def _magic(status: DeploymentStatus) -> Outcome:
    if status is S.RECEIVED:
        return _path(_R)
    if status is S.RECEIVED_BY_WORKER:
        return _path(_R, _W)
    if status is S.RETRY:
        return _path(_R, _W, S.RETRY)
    if status is S.DELIVERED:
        return _path(_R, _W, S.SUCCESS, S.DELIVERED)
    if status is S.FAILURE:
        return Outcome(((_R, 1), (_W, 1), (S.RETRY, RETRIES_BEFORE_FAILURE), (S.FAILURE, 1)))
    if status in _AT_RECEPTION:
        return _path(_R, status)
    return _path(_R, _W, status)


OUTCOMES: tuple[Outcome, ...] = (*(_magic(status) for status in STATUSES), _magic(S.DELIVERED))
DEFAULT_OUTCOME = len(STATUSES)
VALIDATION_ERROR = STATUSES.index(S.VALIDATION_ERROR)
INVALID_PHONE = STATUSES.index(S.INVALID_PHONE)


def outcome_for(cellphone: str) -> int:
    """Index into :data:`OUTCOMES` for a cellphone (``99NN`` magic numbers)."""
    tail = cellphone[-4:]
    if len(tail) == 4 and tail.startswith("99") and tail[2:].isdigit():
        number = int(tail[2:])
        if number < len(STATUSES):
            return number
    return DEFAULT_OUTCOME if cellphone.isdigit() else INVALID_PHONE
