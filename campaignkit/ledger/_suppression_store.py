"""The suppression list in SQL that SQLite and PostgreSQL both run: one
table, ``campaignkit_suppressions``, shared by every run of the ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Final

from ._schema import BATCH, Transaction, Transactional, retried
from ._suppression import Suppression, SuppressionList

# Rows one INSERT carries (4 values each: under SQLite's 32,766 variables).
_ROWS: Final = 1000
_COLUMNS: Final = "phone, reason, source, added"


async def insert_suppressions(
    tx: Transaction, phones: Sequence[str], reason: str, source: str | None, added: float
) -> int:
    """Add ``phones`` to the list in ``tx``; how many were new to it."""
    new = 0
    # In one order whoever adds them: two writers of overlapping numbers
    # wait for each other rather than deadlock.
    phones = sorted(phones)
    for start in range(0, len(phones), _ROWS):
        batch = phones[start : start + _ROWS]
        rows = await tx.fetch(
            f"INSERT INTO campaignkit_suppressions ({_COLUMNS}) VALUES "
            + ", ".join(["(?, ?, ?, ?)"] * len(batch))
            + " ON CONFLICT (phone) DO NOTHING RETURNING phone",
            *(value for phone in batch for value in (phone, reason, source, added)),
        )
        new += len(rows)
    return new


class SuppressionStore(SuppressionList, Transactional):
    """A part of :class:`SqlLedger`."""

    @retried
    async def _add_suppressions(
        self, phones: Sequence[str], reason: str, source: str | None, added: float
    ) -> int:
        async with self._transaction() as tx:
            return await insert_suppressions(tx, phones, reason, source, added)

    @retried
    async def _remove_suppressions(self, phones: Sequence[str]) -> int:
        removed = 0
        async with self._transaction() as tx:
            for start in range(0, len(phones), BATCH):
                condition, args = tx.any_of("phone", phones[start : start + BATCH])
                rows = await tx.fetch(
                    f"DELETE FROM campaignkit_suppressions WHERE {condition} RETURNING phone", *args
                )
                removed += len(rows)
        return removed

    @retried
    async def _find_suppressions(self, phones: Sequence[str]) -> dict[str, Suppression]:
        async with self._transaction() as tx:
            return await self._suppressions_of(tx, phones)

    async def _suppressions_of(
        self, tx: Transaction, phones: Sequence[str]
    ) -> dict[str, Suppression]:
        """The entries of those of ``phones`` on the list, in ``tx``."""
        found: dict[str, Suppression] = {}
        for start in range(0, len(phones), BATCH):
            condition, args = tx.any_of("phone", phones[start : start + BATCH])
            rows = await tx.fetch(
                f"SELECT {_COLUMNS} FROM campaignkit_suppressions WHERE {condition}", *args
            )
            found.update((row[0], Suppression(*row)) for row in rows)
        return found

    async def _suppress_late(self, tx: Transaction, run: str, chunk: str, now: float) -> None:
        """File suppressed the planned recipients of ``chunk`` whose numbers
        were listed since they were planned (in the claim's transaction)."""
        await tx.execute(
            "UPDATE campaignkit_recipients SET state = 'suppressed', updated = ?,"
            " detail = (SELECT s.reason FROM campaignkit_suppressions s"
            " WHERE s.phone = campaignkit_recipients.phone)"
            " WHERE run = ? AND chunk = ? AND state = 'planned'"
            " AND EXISTS (SELECT 1 FROM campaignkit_suppressions s"
            " WHERE s.phone = campaignkit_recipients.phone"
            " AND s.added >= campaignkit_recipients.updated)",
            now,
            run,
            chunk,
        )

    async def suppressions(self, *, page_size: int = 10_000) -> AsyncIterator[Suppression]:
        """Every number on the list, in phone order (read page by page)."""
        after = ""
        while True:
            async with self._transaction() as tx:
                rows = await tx.fetch(
                    f"SELECT {_COLUMNS} FROM campaignkit_suppressions WHERE phone > ?"
                    " ORDER BY phone LIMIT ?",
                    after,
                    page_size,
                )
            for row in rows:
                yield Suppression(*row)
            if len(rows) < page_size:
                return
            after = rows[-1][0]
