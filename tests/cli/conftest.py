"""The CLI tests' sandbox: the root ``sb``, faster and with a fixed seed."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def sandbox_options() -> dict[str, Any]:
    return {"speed": 100, "seed": 3}
