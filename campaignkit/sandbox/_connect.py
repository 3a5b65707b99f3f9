"""A client for scripts and examples: the real service when configured, the
sandbox otherwise."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from ..client import CampaignClient
from ..config import ENV_API_KEY
from ._server import Sandbox


@contextlib.asynccontextmanager
async def client_or_sandbox(
    **sandbox_options: Any,
) -> AsyncIterator[tuple[CampaignClient, Sandbox | None]]:
    """``(client, None)`` for the service the ``CAMPAIGNKIT_*`` variables name
    when ``CAMPAIGNKIT_API_KEY`` is set; otherwise ``(client, sandbox)`` for
    an in-process :class:`Sandbox` built with ``sandbox_options``."""
    if os.environ.get(ENV_API_KEY):
        async with CampaignClient() as client:
            yield client, None
        return
    async with Sandbox(**sandbox_options) as sandbox, sandbox.client() as client:
        yield client, sandbox
