"""The checks every bulk send makes of its options before reading any input."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping
from typing import Final

from .._input.validation import Problems, path_segment

MAX_CONCURRENCY: Final = 1000
"""The most chunk requests a bulk send has under way at once (a task each)."""
MAX_COUNT: Final = 2**63 - 1
"""The largest count a ledger stores (a signed 64-bit integer)."""


def count_problems(name: str, value: object, *, most: int = MAX_COUNT) -> Problems:
    """The problem of a count option unless it is an int from 1 to ``most``."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= most:
        return []
    # A huge int has no repr past 4300 digits, and says nothing more with one.
    if isinstance(value, int) and value.bit_length() > 64:
        shown = f"an int of {value.bit_length()} bits"
    else:
        shown = repr(value)
    return [(name, f"must be an int from 1 to {most}, got {shown}")]


def bulk_problems(
    poll_id: object,
    users: object,
    *,
    chunk_size: object,
    concurrency: object = 1,
    rate_limit: object = None,
    run: object = None,
    interrupt_grace: object = 0.0,
) -> tuple[str, Problems]:
    """The poll id as a path segment, and every problem of the options."""
    problems: Problems = []
    segment = path_segment("poll_id", poll_id, problems)
    problems += count_problems("chunk_size", chunk_size)
    problems += count_problems("concurrency", concurrency, most=MAX_CONCURRENCY)
    if rate_limit is not None and (
        isinstance(rate_limit, bool)
        or not isinstance(rate_limit, int | float)
        or not rate_limit > 0
    ):
        problems.append(("rate_limit", f"must be a number > 0 (requests/s), got {rate_limit!r}"))
    if (
        isinstance(interrupt_grace, bool)
        or not isinstance(interrupt_grace, int | float)
        or not interrupt_grace >= 0
    ):
        problems.append(
            ("interrupt_grace", f"must be a number of seconds >= 0, got {interrupt_grace!r}")
        )
    if run is not None and (not isinstance(run, str) or not run.strip()):
        problems.append(("run", f"must be a non-empty string, got {run!r}"))
    if isinstance(users, str | bytes | Mapping) or not isinstance(users, Iterable | AsyncIterable):
        problems.append(("users", f"expected an iterable of users, got {type(users).__name__}"))
    return segment, problems
