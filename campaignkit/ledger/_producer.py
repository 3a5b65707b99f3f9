"""The producer's bookkeeping of a run: the chunks it enqueued, the inputs it
skipped, and the end of its input."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import LedgerError
from ._records import Skipped
from ._schema import Transactional, retried


class ProducerBookkeeping(Transactional):
    """A part of :class:`SqlLedger`."""

    @retried
    async def finish_input(self, run: str, total: int) -> None:
        """Record that the run's whole input (``total`` items) has been planned."""
        async with self._transaction() as tx:
            await tx.execute(
                "UPDATE campaignkit_runs SET total = ?, input_done = 1 WHERE run = ?", total, run
            )

    @retried
    async def mark_enqueued(self, run: str, chunk: str) -> None:
        async with self._transaction() as tx:
            await tx.execute(
                "UPDATE campaignkit_chunks SET enqueued = 1 WHERE run = ? AND chunk = ?", run, chunk
            )

    @retried
    async def unenqueued_chunks(self, run: str) -> list[str]:
        """Chunks with planned recipients whose message may never have been sent."""
        async with self._transaction() as tx:
            rows = await tx.fetch(
                "SELECT c.chunk FROM campaignkit_chunks c WHERE c.run = ? AND c.enqueued = 0"
                " AND EXISTS (SELECT 1 FROM campaignkit_recipients r WHERE r.run = c.run"
                " AND r.chunk = c.chunk AND r.state = 'planned') ORDER BY c.created",
                run,
            )
        return [row[0] for row in rows]

    @retried
    async def skip(self, run: str, items: Sequence[Skipped]) -> None:
        """Record inputs not sent (invalid or duplicate) by the run's current pass."""
        if not items:
            return
        async with self._transaction() as tx:
            rows = await tx.fetch("SELECT input_pass FROM campaignkit_runs WHERE run = ?", run)
            if not rows:
                raise LedgerError(f"this ledger has no run {run!r}: start_run() first")
            await tx.executemany(
                "INSERT INTO campaignkit_skipped"
                " (run, input_pass, position, kind, phone, reason, line, item)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run, input_pass, position) DO NOTHING",
                [
                    (run, rows[0][0], s.position, s.kind, s.phone, s.reason, s.line, s.item)
                    for s in items
                ],
            )
