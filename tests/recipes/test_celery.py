"""examples/recipes/celery_app.py: Celery prefork workers on RabbitMQ send a
5,000-user run exactly once, one of them killed mid-request (see harness)."""

from __future__ import annotations

import sys
import uuid

import pytest
from helpers import real_servers
from recipes.harness import Engine, send_with_a_worker_killed

from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(150)


def celery_worker(queue: str) -> tuple[str, ...]:
    return (
        *(sys.executable, "-m", "celery", "-A", "celery_app", "worker"),
        *("--pool", "prefork", "--concurrency", "2", "--queues", queue, "--loglevel", "INFO"),
        *("--hostname", f"recipe-{uuid.uuid4().hex[:8]}@%h"),
        *("--without-gossip", "--without-mingle", "--without-heartbeat"),
    )


async def test_celery_sends_each_user_once_with_a_worker_killed(
    sb: Sandbox, postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = Engine("celery_app", celery_worker, " ready.", real_servers.rabbitmq_url())
    figures = await send_with_a_worker_killed(sb, engine, postgres_dsn)
    with capsys.disabled():  # CI's log shows the figures of a passing run too
        print(f"\n{figures}")
