"""The callbacks a receiver still runs when it closes."""

from __future__ import annotations

import asyncio
from typing import Any

from .._redaction import sdk_logger
from .._words import counted

logger = sdk_logger("campaignkit.webhooks")


async def cancel_late(tasks: set[asyncio.Task[Any]], grace: float, what: str) -> None:
    """Give ``tasks`` ``grace`` seconds to finish, then cancel what is left
    (logged as late ``what`` calls) and wait for it to end. A call finishing
    within the grace may start another (late keys' ``update_session``): the
    grace covers it too."""
    loop = asyncio.get_running_loop()
    until = loop.time() + grace
    while (pending := {t for t in tasks if not t.done()}) and (left := until - loop.time()) > 0:
        await asyncio.wait(pending, timeout=left)
    late = {t for t in tasks if not t.done()}
    for task in late:
        task.cancel()
    if late:
        logger.warning("webhook: cancelled %s at shutdown", counted(len(late), f"late {what} call"))
        await asyncio.gather(*late, return_exceptions=True)
