"""A worker's side of a bulk run: its client, its ledger, and the chunk task,
which logs one line per chunk, and leaves to the right workers the chunks
of another ledger."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeAlias

import tenacity
from taskiq import Context, TaskiqState

from .._backoff import reconnect_delay, reconnecting
from .._redaction import sdk_logger
from ..bulk import ChunkSender, Sent, worker_name
from ..client import CampaignClient
from ..errors import ConfigurationError
from ..ledger import Journal, Ledger, LedgerUnavailable, WrongLedger, ledger_from

log = sdk_logger("campaignkit.workers")

LedgerSource: TypeAlias = "Journal | Callable[[], Ledger]"
"""A DSN or SQLite path, a ledger, or a function making one (called once per process)."""


class LedgerSide:
    """One process's ledger (producer or worker side): made from the source,
    opened on first use, closed only if this side made it."""

    def __init__(self, source: LedgerSource) -> None:
        self._source = source
        self._ledger: Ledger | None = None

    async def get(self) -> Ledger:
        if self._ledger is None:
            source = self._source
            ledger = source() if callable(source) else ledger_from(source)
            await ledger.open()
            self._ledger = ledger
        return self._ledger

    async def close(self) -> None:
        ledger, self._ledger = self._ledger, None
        if ledger is not None and ledger is not self._source:
            await ledger.aclose()


class ChunkTask:
    """What one worker process holds between ``WORKER_STARTUP`` and
    ``WORKER_SHUTDOWN`` (its client, its ledger and its
    :class:`~campaignkit.bulk.ChunkSender`), and the chunk task it runs."""

    def __init__(
        self,
        ledger: LedgerSource,
        client: Callable[[], CampaignClient],
        *,
        timeout: float | None,
        max_retries: int | None,
    ) -> None:
        self._ledger = LedgerSide(ledger)
        self._client_factory = client
        self._client: CampaignClient | None = None
        self._sender: ChunkSender | None = None
        self._timeout, self._max_retries = timeout, max_retries
        self.owner = ""
        self._said_left: set[tuple[str, str | None]] = set()

    async def startup(self, state: TaskiqState) -> None:
        self.owner = worker_name()
        ledger = await self._ledger.get()
        self._client = self._client_factory()
        self._sender = ChunkSender(
            self._client,
            ledger,
            owner=self.owner,
            timeout=self._timeout,
            max_retries=self._max_retries,
        )

    async def shutdown(self, state: TaskiqState) -> None:
        client, self._client, self._sender = self._client, None, None
        try:
            if client is not None:
                await client.aclose()
        finally:
            await self._ledger.close()

    async def send(
        self, run: str, chunk: str, ledger_identity: str | None, context: Context | None
    ) -> str | None:
        """Claim ``chunk`` of ``run`` and send it; its outcome, or None when
        nothing was left to claim (a redelivered or superseded message).

        One INFO line of the ``campaignkit.workers`` logger per chunk, or one
        ERROR line (with the traceback) if it fails. A chunk of another
        ledger than this worker's is given back to the queue (see :meth:`_leave`);
        without a task's ``context`` (called directly), ``WrongLedger`` is raised.
        """
        started = time.monotonic()
        try:
            outcome, users = await self._send(run, chunk, ledger_identity)
        except WrongLedger as wrong:
            if context is not None:
                # Raises taskiq's NoResultError once the message is back on the queue.
                await self._leave(run, ledger_identity, wrong, context)
            raise
        except Exception as exc:
            log.error(
                "run %s chunk %s: failed after %.2f s: %s: %s",
                run,
                chunk,
                time.monotonic() - started,
                type(exc).__name__,
                exc,
                exc_info=True,
            )
            raise
        took = time.monotonic() - started
        if outcome is None:
            log.info("run %s chunk %s: nothing left to claim (%.2f s)", run, chunk, took)
        else:
            log.info("run %s chunk %s: %d %s in %.2f s", run, chunk, users, outcome, took)
        return outcome

    async def _leave(
        self, run: str, ledger_identity: str | None, wrong: WrongLedger, context: Context
    ) -> None:
        """Give the message back to the queue, as it came, for a worker of its
        ledger: acknowledged here (a failed task is), the run would wait for
        ever. Sent again before the original is acknowledged, so that it is
        never lost; after a pause, so that a worker alone on the wrong ledger
        does not spin on it. One WARNING per run and ledger, DEBUG after."""
        attempt = int(context.message.labels.get("X-Taskiq-requeue", 0)) + 1
        delay = reconnect_delay(attempt, first=0.5, cap=5.0)
        said = (run, ledger_identity)
        level = logging.DEBUG if said in self._said_left else logging.WARNING
        self._said_left.add(said)
        log.log(level, "%s: not claimed: left on the queue for a worker of that ledger", wrong)
        await asyncio.sleep(delay)
        await context.requeue()

    async def _send(
        self, run: str, chunk: str, ledger_identity: str | None
    ) -> tuple[str | None, int]:
        if self._sender is None:
            raise ConfigurationError(
                "the campaignkit chunk task ran before its worker started: run it in a "
                "taskiq worker (the broker's WORKER_STARTUP event opens the client and ledger)"
            )
        # Lost for longer than the ledger waits, a failed task would be
        # acknowledged and its chunk stay planned for good: the chunk is tried
        # again, which never sends anyone twice (what it sent is claimed, not planned).
        retrying = reconnecting(
            LedgerUnavailable,
            tenacity.stop_never,
            lambda lost, delay, attempt: log.warning(
                "run %s chunk %s: %s: trying the chunk again in %.1f s (attempt %d)",
                *(run, chunk, lost, delay, attempt),
            ),
        )
        sent: Sent | None = await retrying(
            self._sender.send, run, chunk, ledger_identity=ledger_identity
        )
        return (None, 0) if sent is None else (sent.result.outcome, len(sent.claim.recipients))
