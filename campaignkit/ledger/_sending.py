"""The pure parts of the rules that protect the sending line (the daily
limit's budget, each person's line), which :class:`~campaignkit.ledger.Ledger`
applies over its store."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from .._report import DAILY_LIMIT as DAILY_LIMIT_REASON
from .._report import deferral_detail

K = TypeVar("K", bound=Hashable)

DAY: Final = 86_400.0
"""The daily limit's rolling window, in seconds."""

DAILY_LIMIT: Final = "daily_limit"
"""The run option a ledger enforces itself, at claim time."""


def daily_limit_of(options: Mapping[str, Any]) -> int | None:
    limit = options.get(DAILY_LIMIT)
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


def spread(
    phones: Sequence[str], counts: Mapping[str, int], lines: Sequence[str]
) -> dict[str, str]:
    """Round robin: each phone to the line with the fewest people so far
    (``counts``), the first such in ``lines`` on a tie, so that no line gets
    more than one ahead of another."""
    load = {line: counts.get(line, 0) for line in lines}
    order = {line: i for i, line in enumerate(lines)}
    assigned: dict[str, str] = {}
    for phone in phones:
        if phone in assigned:
            continue
        line = min(lines, key=lambda candidate: (load[candidate], order[candidate]))
        assigned[phone] = line
        load[line] += 1
    return assigned


def over_budget(planned: Sequence[K], counted: Collection[K], used: int, limit: int) -> list[K]:
    """The phones of ``planned`` (in input order) that a claim defers: those
    past the ``limit - used`` recipients left today. Phones already
    ``counted`` in the last 24 h cost nothing: the limit counts people."""
    room = limit - used
    deferred: list[K] = []
    for phone in planned:
        if phone in counted:
            continue
        if room > 0:
            room -= 1
        else:
            deferred.append(phone)
    return deferred


def deferred_detail(limit: int, free_from: float | None) -> str:
    """Why a recipient was deferred, and from when a rerun may send it."""
    when = (
        ""
        if free_from is None
        else f" (from {datetime.fromtimestamp(free_from, UTC):%Y-%m-%d %H:%M} UTC at the earliest)"
    )
    return deferral_detail(
        DAILY_LIMIT_REASON,
        f"over the daily limit of {limit} unique recipients per rolling 24 h; "
        f"a rerun sends it once the budget allows{when}",
    )
