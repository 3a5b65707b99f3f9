"""A launch's stages over time: the data of the status-over-time chart."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import attrs

from .._deprecated import renamed_attribute
from ..status import CampaignState
from ._stages import LaunchStages

__all__ = ["Sample", "Timeline"]


@attrs.frozen
class Sample:
    """The stages and the campaign state as observed at ``at`` (aware UTC)."""

    at: datetime
    state: CampaignState | None
    stages: LaunchStages

    funnel = renamed_attribute("Sample", "funnel", "stages")


class Timeline:
    """Samples in time order, bounded: when ``limit`` is reached every other
    sample is dropped (the first and the last stay), so a campaign watched for
    hours keeps its shape in bounded memory."""

    def __init__(self, limit: int = 512) -> None:
        if limit < 2:
            raise ValueError("a timeline keeps at least 2 samples")
        self.limit = limit
        self._samples: list[Sample] = []

    @property
    def samples(self) -> Sequence[Sample]:
        return tuple(self._samples)

    @property
    def last(self) -> Sample | None:
        return self._samples[-1] if self._samples else None

    def record(self, sample: Sample) -> bool:
        """Add ``sample`` unless it shows what the last one shows; True if added."""
        last = self.last
        if last is not None and (last.state, last.stages) == (sample.state, sample.stages):
            return False
        samples = self._samples
        if len(samples) >= self.limit:
            samples[:] = [*samples[:-1:2], samples[-1]]
        samples.append(sample)
        return True
