"""A real aiohttp app on a free loopback port, for the duration of a test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web


@contextlib.asynccontextmanager
async def serving(app: web.Application, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve ``app`` on a free port of ``host``; yield its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, 0).start()
        yield f"http://{host}:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
