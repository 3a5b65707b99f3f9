"""examples/recipes/dramatiq_actors.py: Dramatiq workers on RabbitMQ send a
5,000-user run exactly once, one of them killed mid-request, and give a
chunk of another ledger back to the queue (see harness)."""

from __future__ import annotations

import sys

import pytest
from recipes.harness import (
    Engine,
    delete_rabbitmq_queues,
    send_past_another_ledger,
    send_with_a_worker_killed,
)

from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(150)


def worker() -> tuple[str, ...]:
    """A worker on the actor's queue (CAMPAIGNS_QUEUE)."""
    return (
        sys.executable,
        "-m",
        "dramatiq",
        "dramatiq_actors",
        "--processes",
        "1",
        "--threads",
        "2",
    )


def dramatiq(rabbitmq_url: str) -> Engine:
    async def forget(queue: str) -> None:
        # Dramatiq's queue, its delay queue and its dead letters.
        await delete_rabbitmq_queues(rabbitmq_url, queue, f"{queue}.DQ", f"{queue}.XQ")

    return Engine(
        "dramatiq_actors",
        worker,
        "is ready for action",
        rabbitmq_url,
        bounced="Retrying message",
        forget=forget,
    )


async def test_dramatiq_sends_each_user_once_with_a_worker_killed(
    sb: Sandbox, postgres_dsn: str, rabbitmq_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = await send_with_a_worker_killed(sb, dramatiq(rabbitmq_url), postgres_dsn)
    with capsys.disabled():  # CI's log shows the figures of a passing run too
        print(f"\n{figures}")


async def test_dramatiq_gives_a_chunk_of_another_ledger_back(
    sb: Sandbox, postgres_dsn: str, other_postgres_dsn: str, rabbitmq_url: str
) -> None:
    await send_past_another_ledger(sb, dramatiq(rabbitmq_url), postgres_dsn, other_postgres_dsn)
