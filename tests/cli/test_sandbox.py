"""``campaignkit sandbox``: the real console script serves until Ctrl-C."""

from __future__ import annotations

import asyncio
import signal

from helpers.cli import (
    ENV_NAMES,
    SCRIPT,
    subprocess,
)


async def test_sandbox_command_serves_until_stopped() -> None:
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT),
        "sandbox",
        "--port",
        "0",
        "--speed",
        "50",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        env: dict[str, str] = {}
        while len(env) < 4:
            line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
            assert line, "the sandbox exited early"
            if line.strip().startswith("export "):
                name, _, value = line.strip().removeprefix("export ").partition("=")
                env[name] = value
        assert set(env) == set(ENV_NAMES)
        result = await subprocess("polls", "--json", env=env)
        assert result.code == 0, result.err
        assert result.json()
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop, exit 0
        assert await asyncio.wait_for(proc.wait(), 15) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
