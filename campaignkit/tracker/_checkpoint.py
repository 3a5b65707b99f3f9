"""A tracker's checkpoint: plain JSON-able data of what was yielded, so that
a tracker built with ``resume=`` does not yield it again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ValidationError
from ..status import CampaignState
from ._diff import DeploymentChange, View

VERSION = 1

Pending = Iterable[tuple[str, DeploymentChange]]
"""Changes read but not yet yielded, with their keys."""


def checkpoint(view: View, status_url: str, pending: Pending) -> dict[str, Any]:
    """The checkpoint of ``view``; ``pending`` changes are left out, so that a
    resumed tracker yields them again."""
    statuses = dict(view.current)
    unyield(statuses, pending)
    state = view.state
    return {
        "version": VERSION,
        "launch_request_id": view.launch_request_id,
        "status_url": status_url,
        "state": None if state is None else state.value,
        "statuses": statuses,
    }


def unyield(statuses: dict[str, str | None], pending: Pending) -> None:
    """Set the ``statuses`` of changes read but not yet yielded back to their
    previous status."""
    for key, change in pending:
        previous = change.previous
        statuses[key] = None if previous is None else previous.value


def restore(view: View, data: Mapping[str, Any]) -> bool:
    """Load a checkpoint into ``view``; True when it had read an answer."""
    if not isinstance(data, Mapping) or data.get("version") != VERSION:
        raise ValidationError([("resume", "expects a CampaignTracker.checkpoint()")])
    if data.get("launch_request_id") != view.launch_request_id:
        raise ValidationError(
            [
                (
                    "resume",
                    f"the checkpoint is of launch request {data.get('launch_request_id')!r}, "
                    f"not {view.launch_request_id!r}",
                )
            ]
        )
    statuses = data.get("statuses")
    state = data.get("state")
    if not isinstance(statuses, Mapping) or not all(
        isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in statuses.items()
    ):
        raise ValidationError([("resume.statuses", "must map keys to a status or null")])
    if state is not None and state not in CampaignState.__members__:
        raise ValidationError([("resume.state", f"{state!r} is not a CampaignState")])
    view.restore(statuses)
    if state is None:
        return False
    view.state = CampaignState(state)
    return True


def group_checkpoint(checkpoints: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The checkpoint of a :class:`TrackerGroup`: one per launch."""
    return {"version": VERSION, "trackers": list(checkpoints)}


def group_checkpoints(data: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """Each launch's checkpoint in a group checkpoint, by launch request id."""
    if data is None:
        return {}
    trackers = data.get("trackers") if isinstance(data, Mapping) else None
    if not isinstance(trackers, list) or not all(isinstance(cp, Mapping) for cp in trackers):
        raise ValidationError([("resume", "expects a TrackerGroup.checkpoint()")])
    return {cp.get("launch_request_id"): cp for cp in trackers}
