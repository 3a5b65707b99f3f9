"""Fixtures of real servers (PostgreSQL, Redis) shared by the whole suite."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from helpers import real_servers


@pytest.fixture
async def postgres_dsn() -> AsyncIterator[str]:
    """A DSN of the test PostgreSQL, in a fresh schema dropped after the test."""
    async for dsn in real_servers.fresh_postgres_schema():
        yield dsn


@pytest.fixture
def redis_url() -> str:
    return real_servers.redis_url()
