"""``track`` and ``status``, against an in-process sandbox."""

from __future__ import annotations

import socket
import time

from aiohttp import web
from helpers.cli import (
    first_poll,
    run,
    subprocess,
)
from helpers.servers import serving

from campaignkit import CampaignState, User
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


async def test_track_of_a_mistyped_id_says_what_it_waits_for_and_gives_up(sb: Sandbox) -> None:
    began = time.monotonic()
    result = await run(sb, "track", "0123456789abcdef0123456x", "--not-found-grace", "0.5")
    assert time.monotonic() - began < 8  # not the SDK's 30 s of silence
    assert result.code == 2
    first, *_, last = result.err.splitlines()
    # Told at once, before any wait: what it follows, and for how long an unknown id.
    assert first.startswith("following launch request 0123456789abcdef0123456x until ")
    assert "given up after 0.5 s" in first
    assert last == (
        "campaignkit: error: the service knows no launch request '0123456789abcdef0123456x' "
        "(still 404 after 0.5 s): check the id, `send` prints it as launch_request_id"
    )


async def test_a_wrong_path_prefix_is_told_apart_from_an_unknown_id() -> None:
    # A server without the service's routes: aiohttp's own bare 404.
    async with serving(web.Application()) as url:
        result = await run(
            None, "--api-key", "sk_tst_x", "--base-url", f"{url}/wrong-prefix", "polls"
        )
    assert result.code == 1
    assert result.err.count("\n") == 1
    assert "-> 404: 404: Not Found (the server has no such path: is the service URL's path" in (
        result.err
    )


async def test_a_port_in_use_says_so() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = await run(None, "sandbox", "--port", str(port))
    assert result.code != 0
    assert "address already in use" in result.err
    assert (
        "(the port is in use by another program: pick another port, 0 for a free one)" in result.err
    )
    assert "is the service URL right" not in result.err


async def test_track_help_says_what_done_means() -> None:
    result = await subprocess("track", "--help")
    assert result.code == 0
    assert "Done: settled, no longer waiting" in " ".join(result.out.split())


async def test_the_request_state_is_said_once_not_on_every_progress_line(sb: Sandbox) -> None:
    poll = await first_poll(sb)
    async with sb.client() as client:
        stuck = User(cellphone="3000009901", country_code="+57")  # 9901: stuck in progress
        ack = await client.send_campaign(poll, [stuck])
    argv = ["track", ack.launch_request_id, "--settled", "--poll-interval", "0.05"]
    result = await run(sb, *argv, "--track-timeout", "2.5")
    assert result.code == 5
    lines = result.err.splitlines()
    progress = [line for line in lines if line.startswith("tracking ")]
    assert len(progress) >= 2, lines
    assert not any("request" in line for line in progress), progress
    said = [line for line in lines if line.startswith("request ")]
    assert said, lines
    assert len(said) == len(set(said)), said
    for state in CampaignState:
        assert sum(state.description in line for line in lines) <= 1, lines
