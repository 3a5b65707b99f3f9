"""The checks every bulk send makes of its options before reading any input."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping

from .._input.validation import Problems, path_segment


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
    for name, value in (("chunk_size", chunk_size), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append((name, f"must be an int >= 1, got {value!r}"))
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
