"""The suite's fixtures, in one place.

- every test runs without ``CAMPAIGNKIT_*`` settings in its environment;
- ``fake_time``: a clock and a sleep that advances it
  (:class:`campaignkit.testing.FakeTime`, ``fake_time.install(client)``);
- ``sb``: a fast sandbox (a module overrides ``sandbox_options`` to start it
  with other settings), ``client``: a client wired to it (``client_options``),
  ``api``: raw HTTP calls to it;
- ``mocked``: a scripted exchange, ``scripted_client``: a client over it
  sleeping on ``fake_time``; ``status_server``: a tiny real status server;
- ledgers of both stores, real PostgreSQL and Redis, a server for webhook apps.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from helpers import real_servers
from helpers.exchange import ScriptedExchange
from helpers.fakes import FakeTime
from helpers.ledgers import STORES, NewLedger, ledger_factory
from helpers.sandbox_api import Api
from helpers.tracking import CAMPAIGN, KEY, StatusServer, serving_statuses

from campaignkit import CampaignClient
from campaignkit.ledger import Ledger
from campaignkit.sandbox import Sandbox

SANDBOX_SPEED = 50.0  # one 1 s status step lasts 20 ms of real time


@pytest.fixture(autouse=True)
def _no_campaignkit_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients read ``CAMPAIGNKIT_*`` settings from the environment: a test sees
    none but those it sets. ``CAMPAIGNKIT_TEST_*`` (where the real servers are)
    stays: it configures the suite, not the SDK."""
    for name in list(os.environ):
        if name.startswith("CAMPAIGNKIT_") and not name.startswith("CAMPAIGNKIT_TEST_"):
            monkeypatch.delenv(name)


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


# -- the sandbox -------------------------------------------------------------------


@pytest.fixture
def sandbox_options() -> dict[str, Any]:
    """Override (in a module, or with parametrize) to start ``sb`` otherwise."""
    return {}


@pytest.fixture
async def sb(sandbox_options: dict[str, Any]) -> AsyncIterator[Sandbox]:
    async with Sandbox(**{"speed": SANDBOX_SPEED, **sandbox_options}) as sandbox:
        yield sandbox


@pytest.fixture
def client_options() -> dict[str, Any]:
    """Override to build ``client`` with other settings."""
    return {}


@pytest.fixture
async def client(sb: Sandbox, client_options: dict[str, Any]) -> AsyncIterator[CampaignClient]:
    """A client wired to the sandbox."""
    async with sb.client(**client_options) as opened:
        yield opened


@pytest.fixture
async def api(sb: Sandbox) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as http:
        yield Api(sb, http)


# -- a scripted service --------------------------------------------------------------


@pytest.fixture
def mocked() -> ScriptedExchange:
    return ScriptedExchange()


@pytest.fixture
async def scripted_client(
    mocked: ScriptedExchange, fake_time: FakeTime
) -> AsyncIterator[CampaignClient]:
    """A client whose every request is answered by ``mocked``."""
    async with fake_time.install(
        CampaignClient(KEY, campaign_url=CAMPAIGN, exchange=mocked)
    ) as opened:
        yield opened


@pytest.fixture
async def status_server() -> AsyncIterator[StatusServer]:
    async with serving_statuses() as state:
        yield state


# -- stores and servers ---------------------------------------------------------------


@pytest.fixture(params=STORES)
def new_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> NewLedger:
    """Makes unopened ledgers of one store (each store in turn), all sharing it."""
    return ledger_factory(request, tmp_path)


@pytest.fixture
async def ledger(new_ledger: NewLedger) -> AsyncIterator[Ledger]:
    async with new_ledger() as opened:
        yield opened


@pytest.fixture
async def postgres_dsn() -> AsyncIterator[str]:
    """A DSN of the test PostgreSQL, in a fresh schema dropped after the test."""
    async for dsn in real_servers.fresh_postgres_schema():
        yield dsn


@pytest.fixture
def redis_url() -> str:
    return real_servers.redis_url()


WebClient = TestClient[web.Request, web.Application]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[web.Application], Awaitable[WebClient]]]:
    """Starts aiohttp apps on test servers, closed after the test."""
    clients: list[WebClient] = []

    async def start(app: web.Application) -> WebClient:
        started: WebClient = TestClient(TestServer(app))
        await started.start_server()
        clients.append(started)
        return started

    yield start
    for started in clients:
        await started.close()
