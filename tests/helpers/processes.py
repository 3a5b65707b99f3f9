"""Running a command as a subprocess, bounded in time."""

from __future__ import annotations

import asyncio
from typing import NamedTuple


class Finished(NamedTuple):
    code: int
    out: str
    err: str


async def run_process(*argv: str, env: dict[str, str], timeout: float) -> Finished:
    """Run ``argv`` with ``env``; kill it if it outlives ``timeout`` seconds."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return Finished(proc.returncode, out.decode(), err.decode())
