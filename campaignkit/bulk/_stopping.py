"""How a bulk send's tasks end early: interrupted (Ctrl-C, its task
cancelled), no new request starts and the requests under way get a grace
period to be answered; or its senders failing."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any, Final, Protocol

from .._io.unsent import RetryWaits, retry_waits
from ._pacing import ProgressReporter, logger

DEFAULT_INTERRUPT_GRACE: Final = 10.0
"""Seconds the requests under way when a bulk send is interrupted get to be answered."""


class Sending(Protocol):
    """What :func:`stop_gracefully` stops: a bulk send's pipeline."""

    stopping: bool
    """Set: its senders start no new request."""
    reader: asyncio.Task[None] | None
    queue: asyncio.Queue[Any]
    """The chunks read, for ``concurrency`` senders (None sends one home)."""
    concurrency: int
    interrupt_grace: float
    progress: ProgressReporter


async def stop_gracefully(send: Sending, work: asyncio.Task[None], waits: RetryWaits) -> None:
    """Stop ``work``, the tasks of ``send``: no new request starts (those
    waiting to retry one, ``waits``, are cancelled: nothing under way), the reader
    is cancelled, the senders waiting for a chunk are sent home, and the
    requests under way get ``interrupt_grace`` seconds to be answered (and
    are settled from their answers); those still unanswered then are settled
    ambiguous, and a last progress call says where the run stands. Cancelled
    meanwhile, it stops at once."""
    send.stopping = True
    waits.stop()
    if send.reader is not None:
        send.reader.cancel()
    # The chunks queued are not planned yet: dropped, like the unread input.
    while not send.queue.empty():
        send.queue.get_nowait()
    for _ in range(send.concurrency):
        send.queue.put_nowait(None)
    try:
        await asyncio.wait([work], timeout=send.interrupt_grace)
    finally:
        # Cancelling settles the requests still unanswered ambiguous (send_claim).
        work.cancel()
        await asyncio.shield(asyncio.wait([work]))
        if not work.cancelled() and (failed := work.exception()) is not None:
            # The interrupt goes on; a failure while stopping is not lost.
            logger.error("send_bulk: failed while stopping", exc_info=failed)
    await send.progress.interrupted()


async def until_done(send: Sending, work: Coroutine[Any, Any, None]) -> None:
    """Run ``work``, the tasks of ``send``. Interrupted, stop it
    gracefully (:func:`stop_gracefully`), then the cancellation goes on;
    failed (its senders failing together, a ledger gone), raise the first
    error, the others named in its notes, rather than an ExceptionGroup
    nobody catches."""
    waits = RetryWaits()
    context = contextvars.copy_context()
    context.run(retry_waits.set, waits)  # for every task ``work`` starts
    task = asyncio.create_task(work, context=context)
    try:
        await asyncio.shield(task)  # an interrupt stops it gracefully
    except asyncio.CancelledError:
        if not task.done():
            await stop_gracefully(send, task, waits)
        raise
    except BaseException as failed:
        await send.progress.cancel()
        if not isinstance(failed, BaseExceptionGroup):
            raise
        first, *others = failed.exceptions
        for other in others:
            first.add_note(f"send_bulk: another sender failed too: {other!r}")
        raise first from None
