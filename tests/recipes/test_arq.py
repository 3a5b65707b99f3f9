"""examples/recipes/arq_worker.py: arq workers on Redis send a 5,000-user run
exactly once, one of them killed mid-request (see harness). A chunk of
another ledger is not tested here as it is for Celery and Dramatiq: arq
cannot hand a job to another worker, and a run on 3.12 saw the wrong worker
take one chunk back 20 times in a row (the recipe's docstring says what
follows).

arq pins its Redis client below the one taskiq-redis needs, so the two cannot
share an environment: ``make`` installs arq and its client into the
directory ARQ_PACKAGES beside the dev environment, and the recipe's
processes put it first on their path (the rest, campaignkit included, comes
from the dev environment), as a team on arq installs ``campaignkit[arq]``
without taskiq-redis."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
from recipes.harness import Engine, send_with_a_worker_killed

from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(150)

ARQ_PACKAGES = Path(sys.prefix) / "arq-packages"


def worker() -> tuple[str, ...]:
    """A worker on the recipe's queue (CAMPAIGNS_QUEUE)."""
    return (sys.executable, "-m", "arq", "arq_worker.WorkerSettings")


async def forget(redis_url: str, name: str) -> None:
    """Delete the queue and the keys of its jobs (named after the run's chunks)."""
    conn: Any = redis.asyncio.from_url(redis_url)
    try:
        keys = [key async for key in conn.scan_iter(match=f"arq:*{name}/*")]
        await conn.delete(name, f"{name}:health-check", *keys)
    finally:
        await conn.aclose()


def arq(redis_url: str) -> Engine:
    assert ARQ_PACKAGES.is_dir(), f"{ARQ_PACKAGES} is missing: run make .venv/.installed"
    return Engine(
        "arq_worker",
        worker,
        "Starting worker for",
        redis_url,
        path=(str(ARQ_PACKAGES),),
        # A dead worker's job runs again 10 s after this.
        settings={"CAMPAIGNS_JOB_TIMEOUT": "5"},
        bounced="retrying job in",
        forget=functools.partial(forget, redis_url),
    )


async def test_arq_sends_each_user_once_with_a_worker_killed(
    sb: Sandbox, postgres_dsn: str, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = await send_with_a_worker_killed(sb, arq(redis_url), postgres_dsn)
    with capsys.disabled():  # CI's log shows the figures of a passing run too
        print(f"\n{figures}")
