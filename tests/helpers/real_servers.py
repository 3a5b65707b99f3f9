"""PostgreSQL and Redis on this machine, for the tests that need real servers.

Their addresses come from ``CAMPAIGNKIT_TEST_POSTGRES_DSN`` and
``CAMPAIGNKIT_TEST_REDIS_URL`` (defaults: the development machines' local
servers). When one is unreachable, its tests are skipped with one line saying
how to start it, or fail when ``CI`` is set: CI has the servers, so a skip
there would hide a broken set-up.
"""

from __future__ import annotations

import os
import shutil
import socket
import uuid
from collections.abc import AsyncIterator
from typing import NoReturn
from urllib.parse import urlsplit

import pytest

POSTGRES_DSN = os.environ.get(
    "CAMPAIGNKIT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("CAMPAIGNKIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
RABBITMQ_URL = os.environ.get(
    "CAMPAIGNKIT_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/%2F"
)

HOW_TO_START = {
    "PostgreSQL": "start one (docs/development.md, 'Real servers for the tests') or set "
    "CAMPAIGNKIT_TEST_POSTGRES_DSN",
    "Redis": "start one (docs/development.md, 'Real servers for the tests') or set "
    "CAMPAIGNKIT_TEST_REDIS_URL",
    "RabbitMQ": "start one (docs/development.md, 'Real servers for the tests') or set "
    "CAMPAIGNKIT_TEST_RABBITMQ_URL",
}


def _reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or default_port), 2
        ):
            return True
    except OSError:
        return False


def require(server: str, url: str, default_port: int) -> str:
    """``url`` if the server answers; else skip (or fail under CI) in one line."""
    if _reachable(url, default_port):
        return url
    _missing(f"{server} is not reachable at {url}: {HOW_TO_START[server]}")


def require_program(name: str, how_to_install: str) -> str:
    """The path of the program ``name``; else skip (or fail under CI) in one line."""
    path = shutil.which(name)
    if path is None:
        _missing(f"{name} is not installed: {how_to_install}")
    return path


def _missing(message: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def postgres_dsn() -> str:
    return require("PostgreSQL", POSTGRES_DSN, 5432)


def redis_url() -> str:
    return require("Redis", REDIS_URL, 6379)


def rabbitmq_url() -> str:
    return require("RabbitMQ", RABBITMQ_URL, 5672)


async def fresh_postgres_schema() -> AsyncIterator[str]:
    """A DSN whose connections work in a new, empty schema, dropped afterwards."""
    import asyncpg

    dsn = postgres_dsn()
    schema = f"ck_test_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"CREATE SCHEMA {schema}")
    finally:
        await conn.close()
    separator = "&" if "?" in dsn else "?"
    try:
        yield f"{dsn}{separator}options=-csearch_path%3D{schema}"
    finally:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        finally:
            await conn.close()
