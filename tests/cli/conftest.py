"""Fixtures of the CLI tests: no CAMPAIGNKIT_* variable leaks in, a fast sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from helpers.cli import ENV_NAMES

from campaignkit.sandbox import Sandbox


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def sb() -> AsyncIterator[Sandbox]:
    async with Sandbox(speed=100, seed=3) as sandbox:
        yield sandbox
