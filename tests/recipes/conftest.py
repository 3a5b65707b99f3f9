"""The broker of the RabbitMQ recipes (Celery, Dramatiq), and a second ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from helpers import real_servers


@pytest.fixture
def rabbitmq_url() -> str:
    return real_servers.rabbitmq_url()


@pytest.fixture
async def other_postgres_dsn() -> AsyncIterator[str]:
    """Another ledger's fresh schema, beside ``postgres_dsn``'s."""
    async for dsn in real_servers.fresh_postgres_schema():
        yield dsn
