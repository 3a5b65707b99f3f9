"""The tracker's pure part: ranks of statuses, the diff of one answer
against the statuses held, their counts, and the checkpoint. No I/O, so a
benchmark or a test drives it with decoded bytes directly."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from functools import partial
from itertools import compress, repeat
from operator import attrgetter, ne, or_
from typing import Any

import attrs

from .. import errors
from .._wire.decode import OnAccess, StatusAnswer, StatusEntry
from ..models import CampaignStatus, Deployment
from ..status import CampaignState, DeploymentStatus, stage_of, status_from_wire

_S = DeploymentStatus
_MISSING: Any = object()

# The forward order of statuses. A change is yielded only when the rank grows.
_UNKNOWN_RANK = 5
_FINAL_RANK = 6
_RANKS: dict[DeploymentStatus | None, int] = {
    None: 0,
    _S.RECEIVED: 1,
    _S.RECEIVED_BY_WORKER: 2,
    _S.RETRY: 3,
    _S.SUCCESS: 4,
}


def _rank(status: DeploymentStatus | None) -> int:
    rank = _RANKS.get(status)
    if rank is not None:
        return rank
    assert status is not None
    return _UNKNOWN_RANK if status.is_unknown else _FINAL_RANK


@attrs.frozen(slots=True)
class DeploymentChange:
    """One observed status change of one deployment.

    ``previous`` is None on the first sighting of a deployment with a status;
    ``current`` is never None. ``deployment`` is the deployment as read in
    the poll that showed the change (its ``status`` is ``current``).
    ``launch_request_id`` tells which launch it belongs to (it matters in the
    merged stream of :meth:`CampaignClient.track_many`).
    """

    deployment: Deployment
    previous: DeploymentStatus | None
    current: DeploymentStatus
    observed_at: datetime
    launch_request_id: str = ""


def entry_key(entry: StatusEntry) -> str:
    """The key of one deployment entry: conversation_id, else service_id,
    else cellphone; ``""`` when it has none of them."""
    return entry.conversation_id or entry.service_id or entry.cellphone or ""


def _deployment(entry: StatusEntry, status: DeploymentStatus | None) -> Deployment:
    """The typed Deployment of an entry; an identifier it lacks becomes ``""``."""
    return Deployment(
        entry.conversation_id or "",
        entry.service_id or "",
        entry.cellphone or "",
        entry.business_scope_id,
        entry.username,
        status,
    )


_CONVERSATION_ID = attrgetter("conversation_id")
_STATUS = attrgetter("status")


class View:
    """The tracker's state without I/O: one dict of current wire statuses and
    the counts by status. ``apply`` diffs one answer and returns its changes.

    It is separate from the polling so that the benchmark (and a test) can
    drive it with bytes directly.
    """

    __slots__ = ("changed", "counts", "current", "launch_request_id", "stale", "state")

    def __init__(self, launch_request_id: str) -> None:
        self.launch_request_id = launch_request_id
        self.current: dict[str, str | None] = {}
        self.counts: Counter[DeploymentStatus | None] = Counter()
        self.state: CampaignState | None = None
        self.stale = 0
        self.changed: list[StatusEntry] | None = None
        """When a list, the entries of the changes go there instead of changes
        being made (see ``CampaignTracker.collect_changed``)."""

    def restore(self, statuses: Mapping[str, str | None]) -> None:
        for key, raw in statuses.items():
            self.current[key] = raw
            self.counts[status_from_wire(raw)] += 1

    def apply(
        self, answer: StatusAnswer, observed_at: datetime
    ) -> list[tuple[str, DeploymentChange]]:
        """Diff ``answer`` against the current statuses; update them; return
        ``(key, change)`` for each accepted change, in answer order.

        Entries whose key and status are unchanged cost two comparisons, by
        position, in C. An entry without any identifier raises
        :class:`ResponseError` with its path, before anything is updated (the
        decoder has already checked every type).
        """
        deployments = answer.deployments
        candidates = self._candidates(deployments)
        if not candidates:
            self.state = answer.status
            return []
        return self._apply_candidates(answer, candidates, observed_at)

    def _apply_candidates(
        self, answer: StatusAnswer, candidates: list[StatusEntry], observed_at: datetime
    ) -> list[tuple[str, DeploymentChange]]:
        current = self.current
        counts = self.counts
        get = current.get
        missing = _MISSING
        launch = self.launch_request_id
        stale = self.stale
        collected = self.changed
        collected_before = 0 if collected is None else len(collected)
        changes: list[tuple[str, DeploymentChange]] = []
        undo: list[tuple[str, Any]] = []  # (key, previous wire status or missing)
        for entry in candidates:
            key = entry_key(entry)
            if not key:
                self._rollback(undo)
                if collected is not None:
                    del collected[collected_before:]
                raise _keyless(answer, entry)
            raw = entry.status
            old_raw = get(key, missing)
            if old_raw is missing:
                status = status_from_wire(raw)
                undo.append((key, missing))
                current[key] = raw
                counts[status] += 1
                if status is None:
                    continue  # known from now on; not a change yet
                previous = None
            else:
                if old_raw == raw:
                    continue
                status = status_from_wire(raw)
                previous = status_from_wire(old_raw)
                if status is previous:  # the other spelling of the same status
                    undo.append((key, old_raw))
                    current[key] = raw
                    continue
                if _rank(status) <= _rank(previous):
                    stale += 1  # a stale read going backwards, or a final status
                    continue
                undo.append((key, old_raw))
                current[key] = raw
                counts[previous] -= 1
                if not counts[previous]:
                    del counts[previous]
                counts[status] += 1
            assert status is not None
            if collected is not None:
                collected.append(entry)
                continue
            deployment = _deployment(entry, status)
            changes.append(
                (key, DeploymentChange(deployment, previous, status, observed_at, launch))
            )
        self.stale = stale
        self.state = answer.status
        return changes

    def _rollback(self, undo: list[tuple[str, Any]]) -> None:
        """Undo a partly applied answer (only after a malformed entry)."""
        current = self.current
        for key, old_raw in reversed(undo):
            if old_raw is _MISSING:
                del current[key]
            else:
                current[key] = old_raw
        self.counts = Counter(map(status_from_wire, current.values()))

    def _candidates(self, deployments: list[StatusEntry]) -> list[StatusEntry]:
        """The entries whose (key, status) may differ from the current dict.

        The hot loop runs in C (map/compress), allocating nothing for an
        unchanged entry. The current dict keeps the answer's order (first
        sightings are inserted in answer order), so entries are first
        compared by position with its keys and values: no hashing. If the
        service reordered the answer (many mismatches), they are looked up by
        key instead. An entry without a conversation_id never matches, so
        it is always a candidate and its key is checked.
        """
        current = self.current
        if current:
            flags = map(
                or_,
                map(ne, map(_CONVERSATION_ID, deployments), current),
                map(ne, map(_STATUS, deployments), current.values()),
            )
            candidates = list(compress(deployments, flags))
            known = len(current)
            if len(deployments) > known:
                candidates.extend(deployments[known:])
            if len(candidates) * 4 <= len(deployments):
                return candidates
        old = map(current.get, map(_CONVERSATION_ID, deployments), repeat(_MISSING))
        return list(compress(deployments, map(ne, old, map(_STATUS, deployments))))

    def settled(self) -> bool:
        counts = self.counts
        return bool(counts) and not any(
            count and not stage_of(status).is_settled for status, count in counts.items()
        )

    def result(self, answer: StatusAnswer) -> CampaignStatus:
        """``answer`` as a CampaignStatus, each status as the tracker holds it
        now (a stale backward read is not shown). Its Deployments are made as
        they are read (benchmarks row 2: 100,000 of them per poll otherwise)."""
        deployments = OnAccess(partial(_held_deployments, dict(self.current)), answer.deployments)
        return CampaignStatus(answer.launch_request_id, answer.status, answer.poll_id, deployments)


def _held_deployments(held: dict[str, str | None], entries: list[StatusEntry]) -> list[Deployment]:
    """The Deployments of ``entries``, each with its status in ``held`` (the
    tracker's statuses when the result was asked for) if it is there."""
    return [
        _deployment(entry, status_from_wire(held.get(entry_key(entry), entry.status)))
        for entry in entries
    ]


def _keyless(answer: StatusAnswer, entry: StatusEntry) -> errors.ResponseError:
    # The hot loop keeps no index: it is found for the message only.
    index = next(i for i, item in enumerate(answer.deployments) if item is entry)
    return errors.ResponseError(
        "unexpected response shape: a deployment has no conversation_id, service_id or cellphone",
        path=f"$.deployments[{index}].conversation_id",
    )
