"""How a bulk send stops early: interrupted (Ctrl-C, its task cancelled),
no new request starts and the requests under way get a grace period to be
answered; or its senders failing."""

from __future__ import annotations

import asyncio
from typing import Any, Final

from ._pacing import logger

DEFAULT_INTERRUPT_GRACE: Final = 10.0
"""Seconds the requests under way when a bulk send is interrupted get to be answered."""


async def stop_gracefully(
    work: asyncio.Task[None],
    reader: asyncio.Task[None] | None,
    queue: asyncio.Queue[Any],
    senders: int,
    grace: float,
) -> None:
    """Stop ``work`` (its senders already told to start no new request): the
    ``reader`` is cancelled, the ``senders`` waiting on ``queue`` sent home,
    and the requests under way get ``grace`` seconds to be answered (and are
    settled from their answers); those still unanswered then are settled
    ambiguous. Cancelled meanwhile, it stops at once."""
    if reader is not None:
        reader.cancel()
    # The chunks queued are not planned yet: dropped, like the unread input.
    while not queue.empty():
        queue.get_nowait()
    for _ in range(senders):
        queue.put_nowait(None)
    try:
        await asyncio.wait([work], timeout=grace)
    finally:
        # Cancelling settles the requests still unanswered ambiguous (send_claim).
        work.cancel()
        await asyncio.shield(asyncio.wait([work]))
        if not work.cancelled() and (failed := work.exception()) is not None:
            # The interrupt goes on; a failure while stopping is not lost.
            logger.error("send_bulk: failed while stopping", exc_info=failed)


def first_error(failed: BaseException) -> BaseException:
    """The error to raise for ``failed``: senders failing together (a ledger
    gone) give the first error, the others named in its notes, rather than
    an ExceptionGroup nobody catches."""
    if not isinstance(failed, BaseExceptionGroup):
        return failed
    first, *others = failed.exceptions
    for other in others:
        first.add_note(f"send_bulk: another sender failed too: {other!r}")
    return first
