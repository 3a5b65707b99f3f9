"""A test client serving an aiohttp app, closed after the test."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[web.Application], Awaitable[Client]]]:
    clients: list[Client] = []

    async def start(app: web.Application) -> Client:
        client: Client = TestClient(TestServer(app))
        await client.start_server()
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()
