"""The sending-line rules of the SQL ledgers (see :mod:`._sending`): three
tables of their own, beside the run's."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ._schema import BATCH, Transaction, Transactional, retried
from ._sending import DAY, daily_limit_of, deferred_detail, over_budget, spread

# Recipients that count against the daily limit: taken into a request within
# the window, and not surely refused.
_COUNTED: Final = (
    " FROM campaignkit_recipients r JOIN campaignkit_claims c"
    " ON c.run = r.run AND c.claim = r.claim"
    " WHERE c.claimed > ? AND r.state IN ('in_flight', 'accepted', 'ambiguous')"
)


async def _take_lock(tx: Transaction, name: str) -> None:
    await tx.execute(
        "INSERT INTO campaignkit_locks (name, taken) VALUES (?, ?)"
        " ON CONFLICT (name) DO UPDATE SET taken = excluded.taken",
        name,
        time.time(),
    )


class SendingRulesStore(Transactional):
    """A part of :class:`SqlLedger`."""

    @retried
    async def save_run_options(self, run: str, options: Mapping[str, Any]) -> None:
        async with self._transaction() as tx:
            await tx.execute(
                "INSERT INTO campaignkit_run_options (run, options, saved) VALUES (?, ?, ?)"
                " ON CONFLICT (run) DO UPDATE SET options = excluded.options,"
                " saved = excluded.saved",
                run,
                orjson.dumps(dict(options)).decode(),
                time.time(),
            )

    @retried
    async def run_options(self, run: str) -> dict[str, Any]:
        async with self._transaction() as tx:
            return await _options(tx, run)

    @retried
    async def assign_lines(self, phones: Sequence[str], lines: Sequence[str]) -> dict[str, str]:
        if not phones or not lines:
            return {}
        now = time.time()
        async with self._transaction() as tx:
            await _take_lock(tx, "lines")
            kept: dict[str, str] = {}
            moved: Counter[str] = Counter()  # people leaving a line not among ``lines``
            for start in range(0, len(phones), BATCH):
                condition, args = tx.any_of("phone", list(phones[start : start + BATCH]))
                rows = await tx.fetch(
                    f"SELECT phone, line FROM campaignkit_lines WHERE {condition}", *args
                )
                for phone, line in rows:
                    if line in lines:
                        kept[phone] = line
                    else:
                        moved[line] += 1
            new = [phone for phone in phones if phone not in kept]
            if not new:
                return kept
            condition, args = tx.any_of("line", list(lines))
            rows = await tx.fetch(
                f"SELECT line, people FROM campaignkit_line_load WHERE {condition}", *args
            )
            assigned = spread(new, {line: int(people) for line, people in rows}, lines)
            await tx.executemany(
                "INSERT INTO campaignkit_lines (phone, line, assigned) VALUES (?, ?, ?)"
                " ON CONFLICT (phone) DO UPDATE SET line = excluded.line,"
                " assigned = excluded.assigned",
                [(phone, line, now) for phone, line in assigned.items()],
            )
            moved.subtract(Counter(assigned.values()))
            await tx.executemany(
                "INSERT INTO campaignkit_line_load (line, people) VALUES (?, ?)"
                " ON CONFLICT (line) DO UPDATE"
                " SET people = campaignkit_line_load.people + excluded.people",
                [(line, -change) for line, change in moved.items() if change],
            )
        return kept | assigned

    async def _defer_over_budget(self, tx: Transaction, run: str, chunk: str, now: float) -> None:
        """In a claim's transaction: file the chunk's planned recipients past
        the run's daily limit as deferred, so that the claim leaves them."""
        limit = daily_limit_of(await _options(tx, run))
        if limit is None:
            return
        await _take_lock(tx, "daily_limit")
        since = now - DAY
        planned = await tx.fetch(
            "SELECT phone FROM campaignkit_recipients WHERE run = ? AND chunk = ?"
            " AND state = 'planned' ORDER BY position",
            run,
            chunk,
        )
        used, oldest = (
            await tx.fetch(f"SELECT COUNT(DISTINCT r.phone), MIN(c.claimed){_COUNTED}", since)
        )[0]
        phones = [row[0] for row in planned]
        if len(phones) <= limit - used:
            return
        counted: set[str] = set()
        for start in range(0, len(phones), BATCH):
            condition, args = tx.any_of("r.phone", phones[start : start + BATCH])
            rows = await tx.fetch(
                f"SELECT DISTINCT r.phone{_COUNTED} AND {condition}", since, *args
            )
            counted.update(row[0] for row in rows)
        deferred = over_budget(phones, counted, int(used), limit)
        detail = deferred_detail(limit, None if oldest is None else float(oldest) + DAY)
        for start in range(0, len(deferred), BATCH):
            condition, args = tx.any_of("phone", deferred[start : start + BATCH])
            await tx.execute(
                "UPDATE campaignkit_recipients SET state = 'deferred', detail = ?, updated = ?"
                f" WHERE run = ? AND chunk = ? AND state = 'planned' AND {condition}",
                detail,
                now,
                run,
                chunk,
                *args,
            )


async def _options(tx: Transaction, run: str) -> dict[str, Any]:
    rows = await tx.fetch("SELECT options FROM campaignkit_run_options WHERE run = ?", run)
    if not rows:
        return {}
    options: dict[str, Any] = orjson.loads(rows[0][0])
    return options
