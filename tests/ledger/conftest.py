"""Every ledger test runs against both stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from helpers.ledgers import STORES, NewLedger, ledger_factory

from campaignkit.ledger import Ledger


@pytest.fixture(params=STORES)
def new_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> NewLedger:
    return ledger_factory(request, tmp_path)


@pytest.fixture
async def ledger(new_ledger: NewLedger) -> AsyncIterator[Ledger]:
    async with new_ledger() as opened:
        yield opened
