"""examples/recipes/celery_app.py: Celery prefork workers on RabbitMQ send a
5,000-user run exactly once, one of them killed mid-request, and give a
chunk of another ledger back to the queue (see harness)."""

from __future__ import annotations

import sys
import uuid

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
    """A worker node of a name of its own, on the recipe's default queue (CAMPAIGNS_QUEUE)."""
    return (
        *(sys.executable, "-m", "celery", "-A", "celery_app", "worker"),
        *("--pool", "prefork", "--concurrency", "2", "--loglevel", "INFO"),
        *("--hostname", f"recipe-{uuid.uuid4().hex[:8]}@%h"),
        *("--without-gossip", "--without-mingle", "--without-heartbeat"),
    )


def celery(rabbitmq_url: str) -> Engine:
    async def forget(queue: str) -> None:
        await delete_rabbitmq_queues(rabbitmq_url, queue)

    return Engine(
        "celery_app", worker, " ready.", rabbitmq_url, bounced="Retry in 5s", forget=forget
    )


async def test_celery_sends_each_user_once_with_a_worker_killed(
    sb: Sandbox, postgres_dsn: str, rabbitmq_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = await send_with_a_worker_killed(sb, celery(rabbitmq_url), postgres_dsn)
    with capsys.disabled():  # CI's log shows the figures of a passing run too
        print(f"\n{figures}")


async def test_celery_gives_a_chunk_of_another_ledger_back(
    sb: Sandbox, postgres_dsn: str, other_postgres_dsn: str, rabbitmq_url: str
) -> None:
    await send_past_another_ledger(sb, celery(rabbitmq_url), postgres_dsn, other_postgres_dsn)
