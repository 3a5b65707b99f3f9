"""Ledger stores for tests parametrised over SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from campaignkit.ledger import (
    ACCEPTED,
    Ledger,
    MemoryLedger,
    PostgresLedger,
    Recipient,
    SqliteLedger,
)

STORES = ["sqlite", "postgres"]
"""The durable stores (the ones another process can open)."""
CONFORMING = [*STORES, "memory"]
"""Every ledger the conformance suite (tests/ledger) holds to the same rules."""

NewLedger = Callable[..., Ledger]


def ledger_factory(request: pytest.FixtureRequest, tmp_path: Path) -> NewLedger:
    """Builds unopened ledger objects that all share one store: an SQLite file
    in ``tmp_path``, a fresh PostgreSQL schema, or one memory ledger's contents
    (``request.param`` says which)."""
    if request.param == "memory":
        first = MemoryLedger()

        def memory(**options: Any) -> Ledger:
            # Another object over the same contents, as another connection would be.
            ledger = MemoryLedger(**options)
            ledger.store, ledger._identity = first.store, first._identity
            return ledger

        return memory
    if request.param == "sqlite":
        path = tmp_path / "ledger.db"

        def sqlite(**options: Any) -> Ledger:
            return SqliteLedger(path, **options)

        return sqlite
    dsn = request.getfixturevalue("postgres_dsn")

    def postgres(**options: Any) -> Ledger:
        return PostgresLedger(dsn, **options)

    return postgres


def journal_of(ledger: Ledger) -> str:
    """What ``journal=`` (or another process) names ``ledger``'s store by."""
    if isinstance(ledger, PostgresLedger):
        return ledger.dsn
    assert isinstance(ledger, SqliteLedger), ledger
    return ledger.path


def people(count: int, *, first: int = 0, position: int = 0) -> list[Recipient]:
    """``count`` recipients numbered from ``first``, at input positions from ``position``."""
    return [
        Recipient(
            f"+57300{n:07d}",
            position + i,
            orjson.dumps({"country_code": "+57", "cellphone": f"300{n:07d}"}).decode(),
        )
        for i, n in enumerate(range(first, first + count))
    ]


async def send(ledger: Ledger, run: str, chunk: str, recipients: list[Recipient]) -> int:
    """Plan, claim and accept one chunk; how many the claim took."""
    await ledger.plan(run, chunk, recipients)
    claim = await ledger.claim(run, chunk)
    if claim is None:
        return 0
    await ledger.settle(run, claim.token, ACCEPTED, launch_request_id="L")
    return len(claim.recipients)


async def cancel_while_it_begins(
    ledger: SqliteLedger, monkeypatch: pytest.MonkeyPatch, operation: Awaitable[object]
) -> None:
    """Start ``operation`` on ``ledger`` and cancel it while the ledger's
    thread runs its ``BEGIN`` (held there 0.3 s), as a second Ctrl-C lands."""
    store = ledger.store
    began = threading.Event()
    begin = store._begin

    def begin_slowly(conn: sqlite3.Connection, durable: bool) -> None:
        begin(conn, durable)
        began.set()
        time.sleep(0.3)

    monkeypatch.setattr(store, "_begin", begin_slowly)
    task = asyncio.ensure_future(operation)
    await asyncio.to_thread(began.wait, 10)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    monkeypatch.setattr(store, "_begin", begin)
