"""Reading a run back from the ledger: counts, records, its report, and the
webhook deliveries kept beside the runs."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

from ._records import STATES, Record, RunInfo, Skipped
from ._schema import Transaction, Transactional, retried

# The skipped inputs of the run's latest pass only: another pass's positions
# may name other inputs (a rerun in another order).
_CURRENT_PASS: Final = (
    "run = ? AND input_pass = (SELECT input_pass FROM campaignkit_runs WHERE run = ?)"
)

_RUNS: Final = (
    "SELECT r.run, r.poll, r.created, r.total, r.input_done, s.detail FROM campaignkit_runs r"
    " LEFT JOIN campaignkit_run_stops s ON s.run = r.run"
)


def _run_of(row: tuple[Any, ...]) -> RunInfo:
    name, poll, created, total, done, stopped = row
    return RunInfo(name, poll, created, total, bool(done), stopped)


class LedgerReads(Transactional):
    """The read side of :class:`SqlLedger`."""

    @retried
    async def run_info(self, run: str) -> RunInfo | None:
        async with self._transaction() as tx:
            return await self._run_info(tx, run)

    async def _run_info(self, tx: Transaction, run: str) -> RunInfo | None:
        rows = await tx.fetch(f"{_RUNS} WHERE r.run = ?", run)
        return _run_of(rows[0]) if rows else None

    @retried
    async def runs(self) -> list[RunInfo]:
        """Every run, newest first."""
        async with self._transaction() as tx:
            rows = await tx.fetch(f"{_RUNS} ORDER BY r.created DESC, r.run")
        return [_run_of(row) for row in rows]

    @retried
    async def counts(self, run: str) -> dict[str, int]:
        """Recipients per state (every state present, zeros included)."""
        async with self._transaction() as tx:
            rows = await tx.fetch(
                "SELECT state, COUNT(*) FROM campaignkit_recipients WHERE run = ? GROUP BY state",
                run,
            )
            skipped = await tx.fetch(
                f"SELECT kind, COUNT(*) FROM campaignkit_skipped WHERE {_CURRENT_PASS}"
                " GROUP BY kind",
                run,
                run,
            )
        counts = dict.fromkeys((*STATES, "invalid", "duplicate"), 0)
        counts.update({state: int(n) for state, n in rows})
        counts.update({kind: int(n) for kind, n in skipped})
        return counts

    async def records(
        self, run: str, states: Sequence[str] = STATES, *, page_size: int = 10_000
    ) -> AsyncIterator[Record]:
        """The run's recipients in those states, in input order, read page by page."""
        position, phone = -1, ""
        while True:
            async with self._transaction() as tx:
                condition, args = tx.any_of("state", list(states))
                rows = await tx.fetch(
                    "SELECT phone, position, state, launch_request_id, detail, user_wire, claim"
                    " FROM campaignkit_recipients WHERE run = ?"
                    f" AND (position > ? OR (position = ? AND phone > ?)) AND {condition}"
                    " ORDER BY position, phone LIMIT ?",
                    run,
                    position,
                    position,
                    phone,
                    *args,
                    page_size,
                )
            for row in rows:
                yield Record(*row)
            if len(rows) < page_size:
                return
            phone, position = rows[-1][0], rows[-1][1]

    @retried
    async def held(self, run: str, phones: Sequence[str]) -> dict[str, tuple[Record, float | None]]:
        """The records of ``phones`` in the run, each with when its claim was taken."""
        held: dict[str, tuple[Record, float | None]] = {}
        for start in range(0, len(phones), 5000):
            async with self._transaction() as tx:
                condition, args = tx.any_of("r.phone", list(phones[start : start + 5000]))
                rows = await tx.fetch(
                    "SELECT r.phone, r.position, r.state, r.launch_request_id, r.detail,"
                    " r.user_wire, r.claim, c.claimed FROM campaignkit_recipients r"
                    " LEFT JOIN campaignkit_claims c ON c.run = r.run AND c.claim = r.claim"
                    f" WHERE r.run = ? AND {condition}",
                    run,
                    *args,
                )
            held.update((row[0], (Record(*row[:7]), row[7])) for row in rows)
        return held

    @retried
    async def claims(self, run: str) -> list[tuple[str, str, str, str | None, str | None]]:
        """Every claim of the run: ``(claim, chunk, state, ack, detail)``, oldest first."""
        async with self._transaction() as tx:
            rows = await tx.fetch(
                "SELECT claim, chunk, state, ack, detail FROM campaignkit_claims"
                " WHERE run = ? ORDER BY claimed, claim",
                run,
            )
        return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    @retried
    async def skipped(self, run: str) -> list[Skipped]:
        """The inputs the run's current pass did not send."""
        async with self._transaction() as tx:
            rows = await tx.fetch(
                "SELECT position, kind, phone, reason, line, item FROM campaignkit_skipped"
                f" WHERE {_CURRENT_PASS} ORDER BY position",
                run,
                run,
            )
        return [Skipped(*row) for row in rows]

    @retried
    async def last_update(self, run: str) -> float | None:
        async with self._transaction() as tx:
            rows = await tx.fetch(
                "SELECT MAX(updated) FROM campaignkit_recipients WHERE run = ?", run
            )
        return None if rows[0][0] is None else float(rows[0][0])

    # -- webhook deliveries

    @retried
    async def first_sighting(self, namespace: str, key: str) -> bool:
        """Remember ``key``; True the first time it is seen in ``namespace``."""
        async with self._transaction() as tx:
            rows = await tx.fetch(
                "INSERT INTO campaignkit_seen (namespace, key, seen) VALUES (?, ?, ?)"
                " ON CONFLICT (namespace, key) DO NOTHING RETURNING key",
                namespace,
                key,
                time.time(),
            )
        return bool(rows)

    @retried
    async def prune_seen(self, namespace: str, before: float) -> int:
        """Forget the keys of ``namespace`` first seen before ``before`` (UNIX seconds)."""
        async with self._transaction() as tx:
            rows = await tx.fetch(
                "DELETE FROM campaignkit_seen WHERE namespace = ? AND seen < ? RETURNING key",
                namespace,
                before,
            )
        return len(rows)

    @retried
    async def forget(self, namespace: str, key: str) -> None:
        """Forget ``key`` (its handling failed: a redelivery should be handled)."""
        async with self._transaction() as tx:
            await tx.execute(
                "DELETE FROM campaignkit_seen WHERE namespace = ? AND key = ?", namespace, key
            )
