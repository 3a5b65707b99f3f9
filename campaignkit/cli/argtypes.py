"""Parsers of option values: a value, or argparse's usage error (exit 2)."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, timedelta

from .._input.users import parse_time


def add_session_range(parser: argparse.ArgumentParser, page_size_help: str) -> None:
    """``--since``, ``--until`` and ``--page-size``: a poll's sessions as the
    service lists them."""
    parser.add_argument("--since", type=timestamp, help="UNIX seconds or ISO 8601 (UTC if naive)")
    parser.add_argument("--until", type=timestamp, help="UNIX seconds or ISO 8601 (UTC if naive)")
    parser.add_argument("--page-size", type=int, help=page_size_help)


def timestamp(text: str) -> int:
    """UNIX seconds, or an ISO 8601 date / date-time; for ``--since`` and
    ``--until`` a naive one means UTC (documented; an ETA refuses it)."""
    try:
        parsed = parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if isinstance(parsed, int):
        return parsed
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp())


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value:  # NaN
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")
    return value


def positive_float(text: str) -> float:
    value = _number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def share(text: str) -> float:
    """A share from 0 to 1 (0.05 for 5%)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a share from 0 to 1 (0.05 for 5%): {text!r}")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def duration(text: str) -> timedelta:
    """A duration as days, hours, minutes and seconds in that order
    (``24h``, ``90m``, ``1h30m``, ``2d``); a bare number is refused, its
    unit unknown."""
    spaced = text.strip().lower()
    found = _DURATION.fullmatch(spaced)
    if not spaced or found is None:
        raise argparse.ArgumentTypeError(
            f"expected a duration with its units, d (days), h (hours), m (minutes) or "
            f"s (seconds), e.g. 24h, 90m or 1h30m; got {text!r}"
        )
    days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
    value = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if value <= timedelta(0):
        raise argparse.ArgumentTypeError(f"must be longer than 0: {text!r}")
    return value
