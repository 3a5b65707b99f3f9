"""The callbacks a receiver still runs when it closes."""

from __future__ import annotations

import asyncio
from typing import Any

from .._redaction import sdk_logger

logger = sdk_logger("campaignkit.webhooks")


async def cancel_late(tasks: set[asyncio.Task[Any]], grace: float, what: str) -> None:
    """Give ``tasks`` ``grace`` seconds to finish, then cancel what is left
    (logged as late ``what`` calls) and wait for it to end."""
    if tasks:
        await asyncio.wait(set(tasks), timeout=grace)
    late = set(tasks)
    for task in late:
        task.cancel()
    if late:
        logger.warning("webhook: cancelled %d late %s call(s) at shutdown", len(late), what)
        await asyncio.gather(*late, return_exceptions=True)
