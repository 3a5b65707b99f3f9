"""``CampaignTracker``: every deployment status change of a campaign, as an
async iterator, from polling its ``status_url`` (the contract is the
Tracker section of DESIGN.md).

- ``_diff``: the pure part: status ranks (statuses only move forward, a
  final one never changes, so no transition is yielded twice), the diff of
  one answer against the statuses held, their counts.
- ``_records``: :class:`TrackerStats`.
- ``_checkpoint``: what was yielded, as JSON-able data, and back.
- ``_schedule``: the tenacity strategies of the polls: the default wait
  (back off while nothing changes) and the stop at the timeout.
- ``_pacer``: one poll at a time for every consumer (the change iterator,
  ``updates()``) of a tracker or a group.
- ``_tracker``: the tracker, polling through a small :class:`StatusSource`
  (the client's transport); ``_group``: ``track_many``'s merged stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._deprecated import renamed
from .._wire.sansio import resolve_status_url
from ..models import CampaignAck
from ..progress import ProgressUpdate
from ._diff import DeploymentChange
from ._group import TrackerGroup
from ._options import OnState, StatusSource, TrackOptions, Until
from ._records import TrackerStats
from ._tracker import CampaignTracker

Target = CampaignAck | str
"""What can be tracked: an acknowledgement, a ``launch_request_id`` or a ``status_url``."""

__all__ = [
    "CampaignTracker",
    "DeploymentChange",
    "OnState",
    "StatusSource",
    "Target",
    "TrackOptions",
    "TrackerGroup",
    "TrackerStats",
    "Until",
    "resolve_status_url",
]

if TYPE_CHECKING:
    Progress = ProgressUpdate
else:
    __getattr__ = renamed(__name__, {"Progress": ("campaignkit.ProgressUpdate", ProgressUpdate)})
