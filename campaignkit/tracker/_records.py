"""What a tracker tells of itself: :class:`TrackerStats` (its progress is a
:class:`~campaignkit.ProgressUpdate`)."""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class TrackerStats:
    """``polls``: HTTP exchanges made; ``retries``: failed polls that were
    retried; ``changes``: changes yielded; ``stale``: backward moves ignored;
    ``elapsed``: seconds since the first poll."""

    polls: int = 0
    retries: int = 0
    changes: int = 0
    stale: int = 0
    elapsed: float = 0.0
