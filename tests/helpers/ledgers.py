"""Ledger stores for tests parametrised over SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from campaignkit.ledger import Ledger, PostgresLedger, SqliteLedger

STORES = ["sqlite", "postgres"]

NewLedger = Callable[..., Ledger]


def ledger_factory(request: pytest.FixtureRequest, tmp_path: Path) -> NewLedger:
    """Builds unopened ledger objects that all share one store: an SQLite file
    in ``tmp_path``, or a fresh PostgreSQL schema (``request.param`` says which)."""
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
