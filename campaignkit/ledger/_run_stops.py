"""How a run's sending stops short, in SQL: a claim released unsent, claims
expired (their sender died or hung), and the fatal answer that ended a run
(see :class:`~campaignkit.ledger.Ledger`)."""

from __future__ import annotations

import time

from ._protocol import EXPIRED
from ._schema import BATCH, Transactional, retried


class RunStops(Transactional):
    """A part of :class:`SqlLedger`."""

    @retried
    async def release(self, run: str, claim: str) -> None:
        async with self._transaction() as tx:
            await tx.execute(
                "UPDATE campaignkit_claims SET state = 'planned'"
                " WHERE run = ? AND claim = ? AND state IN ('in_flight', 'ambiguous')",
                run,
                claim,
            )
            await tx.execute(
                "UPDATE campaignkit_recipients SET state = 'planned', claim = NULL, detail = NULL,"
                " updated = ? WHERE run = ? AND claim = ? AND state IN ('in_flight', 'ambiguous')",
                time.time(),
                run,
                claim,
            )

    @retried
    async def expire(self, run: str, *, now: float | None = None) -> int:
        """Report the recipients of expired claims ambiguous; how many there were."""
        now = time.time() if now is None else now
        async with self._transaction() as tx:
            claims = await tx.fetch(
                "UPDATE campaignkit_claims SET state = 'ambiguous', detail = ?"
                " WHERE run = ? AND state = 'in_flight' AND expires < ? RETURNING claim",
                EXPIRED,
                run,
                now,
            )
            expired = 0
            for start in range(0, len(claims), BATCH):
                condition, args = tx.any_of("claim", [c[0] for c in claims[start : start + BATCH]])
                rows = await tx.fetch(
                    "UPDATE campaignkit_recipients SET state = 'ambiguous', detail = ?, updated = ?"
                    f" WHERE run = ? AND state = 'in_flight' AND {condition} RETURNING phone",
                    EXPIRED,
                    now,
                    run,
                    *args,
                )
                expired += len(rows)
        return expired

    @retried
    async def stop_run(self, run: str, detail: str) -> None:
        async with self._transaction() as tx:
            await tx.execute(
                "INSERT INTO campaignkit_run_stops (run, detail, stopped)"
                " SELECT run, ?, ? FROM campaignkit_runs WHERE run = ?"
                " ON CONFLICT (run) DO NOTHING",
                detail,
                time.time(),
                run,
            )
