"""The conformance suite runs every ledger: the durable ones and the memory one."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.ledgers import CONFORMING, NewLedger, ledger_factory


@pytest.fixture(params=CONFORMING)
def new_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> NewLedger:
    """Makes unopened ledgers of one store (each store in turn), all sharing it."""
    return ledger_factory(request, tmp_path)
