"""``track`` and ``status``, against an in-process sandbox."""

from __future__ import annotations

from helpers.cli import (
    first_poll,
    run,
)

from campaignkit import User
from campaignkit.sandbox import Sandbox


async def test_status_of_unknown_launch_is_one_line_error(sb: Sandbox) -> None:
    result = await run(sb, "status", "nope0000")
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert result.err.startswith("campaignkit: error: ")
    assert "404" in result.err


async def test_track_timeout_on_stuck_deployment_exit_5(sb: Sandbox) -> None:
    poll = await first_poll(sb)
    async with sb.client() as client:
        stuck = User(cellphone="3000009901", country_code="+57")  # 9901: stuck in progress
        ack = await client.send_campaign(poll, [stuck])
    result = await run(
        sb,
        "track",
        ack.launch_request_id,
        "--settled",
        "--poll-interval",
        "0.05",
        "--track-timeout",
        "1",
    )
    assert result.code == 5
    assert "RECEIVED_BY_WORKER" in result.out  # the last counts are still shown
    assert result.err.strip().splitlines()[-1].startswith("campaignkit: error: ")
