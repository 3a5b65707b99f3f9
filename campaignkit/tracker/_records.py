"""What a tracker tells of its progress and of itself: :class:`Progress`
(from the counts by status) and :class:`TrackerStats`."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ..status import DeploymentStatus

_S = DeploymentStatus


@attrs.frozen(slots=True)
class Progress:
    """Campaign progress for a progress bar or a chat message.

    ``done`` counts deployments out of progress (sent, delivered, failed, or
    an unknown status); ``failed`` those that will not be sent; ``delivered``
    those confirmed on the device (``DELIVERED``, ``PUSH_NOTIFICATION``).
    """

    done: int
    total: int
    failed: int
    delivered: int

    @property
    def fraction(self) -> float:
        """``done / total`` (0.0 while no deployment is known)."""
        return self.done / self.total if self.total else 0.0

    @classmethod
    def of(cls, counts: Mapping[DeploymentStatus | None, int]) -> Progress:
        total = done = failed = delivered = 0
        for status, count in counts.items():
            total += count
            if status is None or status.is_in_progress:
                continue
            done += count
            if status.is_failure:
                failed += count
            elif status is _S.DELIVERED or status is _S.PUSH_NOTIFICATION:
                delivered += count
        return cls(done, total, failed, delivered)


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
