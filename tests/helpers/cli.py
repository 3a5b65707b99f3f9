"""Running the ``campaignkit`` command in tests: in process (``cli.run`` in a
worker thread, so a sandbox keeps serving on the test's loop) or as the real
console script in a subprocess; both bounded in time."""

from __future__ import annotations

import asyncio
import csv
import io
import os
import socket
import sys
from pathlib import Path
from typing import Any

import orjson

from campaignkit import cli
from campaignkit.sandbox import Sandbox
from helpers.processes import run_process

SCRIPT = Path(sys.executable).with_name("campaignkit")
ENV_NAMES = (
    "CAMPAIGNKIT_API_KEY",
    "CAMPAIGNKIT_BASE_URL",
    "CAMPAIGNKIT_CAMPAIGN_URL",
    "CAMPAIGNKIT_AGENT_URL",
)


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def json(self) -> Any:
        return orjson.loads(self.out)


def sandbox_args(sb: Sandbox) -> list[str]:
    """The command-line options that point ``campaignkit`` at ``sb``."""
    return [
        "--api-key",
        sb.api_key,
        "--base-url",
        sb.base_url,
        "--campaign-url",
        sb.campaign_url,
        "--agent-url",
        sb.agent_url,
    ]


def sandbox_env(sb: Sandbox) -> dict[str, str]:
    """The environment of a ``campaignkit`` process wired to ``sb``."""
    return {
        **os.environ,
        "CAMPAIGNKIT_API_KEY": sb.api_key,
        "CAMPAIGNKIT_BASE_URL": sb.base_url,
        "CAMPAIGNKIT_CAMPAIGN_URL": sb.campaign_url,
        "CAMPAIGNKIT_AGENT_URL": sb.agent_url,
    }


async def run(sb: Sandbox | None, *argv: str) -> Result:
    """``campaignkit ARGV`` in process, wired to ``sb`` when given."""
    out, err = io.StringIO(), io.StringIO()
    conn = [] if sb is None else sandbox_args(sb)
    code = await asyncio.wait_for(
        asyncio.to_thread(cli.run, [*argv, *conn], stdout=out, stderr=err), 60
    )
    return Result(code, out.getvalue(), err.getvalue())


async def subprocess(
    *argv: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    program: tuple[str, ...] = (str(SCRIPT),),
) -> Result:
    """The console script (or ``program``) with ``argv``, no CAMPAIGNKIT_* but ``env``."""
    full_env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    full_env.update(env or {})
    return Result(*await run_process(*program, *argv, env=full_env, timeout=timeout))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def users_rows(count: int, start: int = 0) -> list[dict[str, str]]:
    return [
        {"country_code": "+57", "cellphone": f"300{i:07d}", "name": f"U{i}"}
        for i in range(start, start + count)
    ]


async def first_poll(sb: Sandbox) -> int:
    async with sb.client() as client:
        return (await client.list_polls())[0].id
