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
        "200/200 settled (100%)",
        "the sandbox POSTed the webhook: HTTP 202",
        "on_reply got session_external_id",
        "Session updated",
        "Session history",
        "Yes, tell me more",
        "Done in",
    ):
        assert marker in out, marker
    assert "200/200" in result.err  # the progress reached the end
    assert "Traceback" not in result.err
