"""Shared benchmark machinery: alternating A/B timing and the result rows.

Every benchmark module under ``benchmarks/`` named ``bench_*.py`` defines
``run(quick: bool) -> list[Row]``. ``python -m benchmarks`` runs them all,
prints a table and writes ``benchmarks/results.json``; ``--quick`` runs small
sizes (the test suite does that so no benchmark can rot).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs


@attrs.frozen
class Timing:
    """Seconds per round of one side, over the rounds."""

    median: float
    minimum: float
    maximum: float

    @classmethod
    def of(cls, samples: list[float]) -> Timing:
        return cls(statistics.median(samples), min(samples), max(samples))


@attrs.frozen
class Row:
    """One line of the results table.

    ``ratio`` is SDK/floor for times (lower is better) or SDK/floor for
    throughputs (higher is better), as ``better`` says; ``target`` is the
    issue's bound for it, ``None`` where the row only states a figure.
    """

    name: str
    ratio: float | None
    target: float | None
    better: str = "lower"
    sdk: Timing | None = None
    floor: Timing | None = None
    notes: str = ""
    figures: dict[str, Any] = attrs.field(factory=dict)

    @property
    def met(self) -> bool | None:
        if self.ratio is None or self.target is None:
            return None
        return self.ratio <= self.target if self.better == "lower" else self.ratio >= self.target


def ab_sync(
    floor: Callable[[], object], sdk: Callable[[], object], rounds: int
) -> tuple[Timing, Timing]:
    """Time ``floor`` and ``sdk`` alternately (A B A B ...), ``rounds`` each."""
    floor_samples: list[float] = []
    sdk_samples: list[float] = []
    for _ in range(rounds):
        for fn, samples in ((floor, floor_samples), (sdk, sdk_samples)):
            gc.collect()
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
    return Timing.of(floor_samples), Timing.of(sdk_samples)


async def ab_async(
    floor: Callable[[], Awaitable[object]], sdk: Callable[[], Awaitable[object]], rounds: int
) -> tuple[Timing, Timing]:
    """The awaitable version of :func:`ab_sync`."""
    floor_samples: list[float] = []
    sdk_samples: list[float] = []
    for _ in range(rounds):
        for fn, samples in ((floor, floor_samples), (sdk, sdk_samples)):
            gc.collect()
            await asyncio.sleep(0)
            started = time.perf_counter()
            await fn()
            samples.append(time.perf_counter() - started)
    return Timing.of(floor_samples), Timing.of(sdk_samples)


def time_ratio(name: str, floor: Timing, sdk: Timing, target: float | None, **kw: Any) -> Row:
    """A row whose ratio is SDK time / floor time (lower is better)."""
    return Row(name, sdk.median / floor.median, target, "lower", sdk, floor, **kw)


def throughput_ratio(name: str, floor: Timing, sdk: Timing, target: float | None, **kw: Any) -> Row:
    """A row whose ratio is SDK throughput / floor throughput (higher is better)."""
    return Row(name, floor.median / sdk.median, target, "higher", sdk, floor, **kw)
