"""``campaignkit demo``: the real console script, end to end."""

from __future__ import annotations

from helpers.cli import (
    subprocess,
)


async def test_demo_end_to_end() -> None:
    result = await subprocess("demo", "--speed", "40", timeout=90)
    assert result.code == 0, result.err[-2000:]
    out = result.out
    for marker in (
        "202 accepted",
        "final per-status table",
        "DELIVERED",
        "FAILURE_BY_PAYMENT_ISSUE",
        "PUSH_NOTIFICATION",
        "total 200",
        "the sandbox POSTed the response webhook: HTTP 200",
        "on_event got session_id sr-",
        "merged them into the session: {'plan': 'gold', 'assigned_agent': '",
        "Session history",
        "Yes, tell me more",
        "Done in",
    ):
        assert marker in out, marker
    assert "200/200" in result.err  # the progress reached the end
    assert "Traceback" not in result.err
