"""The conformance suite runs every ledger: the durable ones and the memory one."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.ledgers import CONFORMING, STORES, NewLedger, ledger_factory


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A test marked durable (the SQL schema, another process opening the
    # store) runs on the durable stores only: never generated, not skipped,
    # for the memory ledger.
    if "new_ledger" in metafunc.fixturenames:
        durable = metafunc.definition.get_closest_marker("durable") is not None
        metafunc.parametrize("new_ledger", STORES if durable else CONFORMING, indirect=True)


@pytest.fixture
def new_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> NewLedger:
    """Makes unopened ledgers of one store (each store in turn), all sharing it."""
    return ledger_factory(request, tmp_path)
