"""Option values: ``--since``/``--until`` timestamps."""

from __future__ import annotations

import pytest

from campaignkit.cli import argtypes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1700000000", 1700000000),
        ("2024-01-01", 1704067200),
        ("2024-01-01T01:00:00Z", 1704070800),
        ("2024-01-01T02:00:00+01:00", 1704070800),
    ],
)
def test_timestamps(text: str, expected: int) -> None:
    assert argtypes.timestamp(text) == expected
