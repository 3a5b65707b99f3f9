"""The outcomes of a run's recipients in SQL that SQLite and PostgreSQL both
run: written in bulk by tracking, one by one by the webhooks."""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from itertools import repeat
from operator import add
from typing import TYPE_CHECKING, Final

from .._funnel import OutcomeGroup
from .._redaction import sdk_logger
from ._outcomes import RecipientOutcome, StatusRow, fact_of
from ._schema import Transactional, retried
from ._suppression import OPT_OUT, listed_by_outcome
from ._suppression_store import insert_suppressions

if TYPE_CHECKING:
    from ..webhooks import WebhookEvent

log = sdk_logger("campaignkit.ledger")

# A status replaces the one held only when it differs: following a launch
# again (after an interruption) sees the same statuses, and keeps their times.
_STATUS_UPSERT: Final = (
    "INSERT INTO campaignkit_outcomes"
    " (run, phone, launch_request_id, conversation_id, status, status_at)"
    " VALUES (?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (run, phone) DO UPDATE SET launch_request_id = excluded.launch_request_id,"
    " conversation_id = excluded.conversation_id, status = excluded.status,"
    " status_at = excluded.status_at"
    " WHERE campaignkit_outcomes.status IS NULL"
    " OR campaignkit_outcomes.status <> excluded.status"
)

# Run by run, newest first, each a lookup of the recipients' primary key: no
# index of phones across runs, and few runs beside many recipients (a join
# let SQLite scan every recipient of every run).
RUN_OF_PHONE: Final = (
    "SELECT u.run FROM campaignkit_runs u WHERE EXISTS (SELECT 1"
    " FROM campaignkit_recipients r WHERE r.run = u.run AND r.phone = ?"
    " AND r.state = 'accepted') ORDER BY u.created DESC, u.run DESC LIMIT 1"
)
"""The most recent run holding a phone as accepted."""

_COLUMNS: Final = (
    "phone, launch_request_id, conversation_id, status, status_at,"
    " delivered_at, read_at, replied_at, answer, opted_out_at"
)


class OutcomeStore(Transactional):
    """A part of :class:`SqlLedger`: see :class:`Ledger`'s outcome methods."""

    @retried
    async def record_statuses(
        self, run: str, rows: Sequence[StatusRow], *, final: Sequence[str] = ()
    ) -> None:
        now = time.time()
        async with self._transaction() as tx:
            if rows:
                # Each row's values after the run's, joined in C (benchmarks row 15).
                await tx.executemany(_STATUS_UPSERT, map(add, repeat((run,)), rows))
            # In the same transaction: an outcome is never kept without its listing.
            listed = listed_by_outcome(rows)
            for reason, phones in listed.items():
                await insert_suppressions(tx, phones, reason, run, now)
            if final:
                await tx.executemany(
                    "INSERT INTO campaignkit_followed (run, launch_request_id, final_at)"
                    " VALUES (?, ?, ?) ON CONFLICT (run, launch_request_id) DO NOTHING",
                    [(run, launch, now) for launch in final],
                )

    @retried
    async def record_event(self, event: WebhookEvent) -> None:
        found = fact_of(event)
        if found is None:
            return
        column = found.fact  # one of FACTS' values: never the sender's text
        async with self._transaction() as tx:
            runs = await tx.fetch(RUN_OF_PHONE, found.phone)
            if column == "opted_out_at":  # listed even when no run of ours sent it
                source = runs[0][0] if runs else None
                await insert_suppressions(tx, [found.phone], OPT_OUT, source, time.time())
            if not runs:
                log.info("webhook: a %s event of no accepted recipient: not recorded", column)
                return
            await tx.execute(
                f"INSERT INTO campaignkit_outcomes (run, phone, conversation_id, {column}, answer)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (run, phone) DO UPDATE SET"
                f" {column} = COALESCE(campaignkit_outcomes.{column}, excluded.{column}),"
                " conversation_id ="
                " COALESCE(campaignkit_outcomes.conversation_id, excluded.conversation_id),"
                " answer = COALESCE(campaignkit_outcomes.answer, excluded.answer)",
                runs[0][0],
                found.phone,
                found.conversation_id,
                found.at,
                found.answer,
            )

    @retried
    async def launch_phones(self, run: str, launches: Collection[str]) -> dict[str, list[str]]:
        phones: dict[str, list[str]] = {launch: [] for launch in launches}
        if not phones:
            return phones
        async with self._transaction() as tx:
            # A row per launch, its phones (never a space in them) joined:
            # half the time of a row per phone (benchmarks row 15).
            rows = await tx.fetch(
                f"SELECT launch_request_id, {tx.spaced('phone')} FROM campaignkit_recipients"
                " WHERE run = ? AND state = 'accepted' GROUP BY launch_request_id",
                run,
            )
        phones.update((launch, joined.split(" ")) for launch, joined in rows if launch in phones)
        return phones

    @retried
    async def outcomes(self, run: str) -> list[RecipientOutcome]:
        async with self._transaction() as tx:
            rows = await tx.fetch(
                f"SELECT {_COLUMNS} FROM campaignkit_outcomes WHERE run = ? ORDER BY phone", run
            )
        return [RecipientOutcome.of_row(*row) for row in rows]

    @retried
    async def outcome_groups(self, run: str) -> list[OutcomeGroup]:
        async with self._transaction() as tx:
            rows = await tx.fetch(
                "SELECT status, delivered_at IS NOT NULL, read_at IS NOT NULL,"
                " replied_at IS NOT NULL, opted_out_at IS NOT NULL, COUNT(*)"
                " FROM campaignkit_outcomes WHERE run = ? GROUP BY 1, 2, 3, 4, 5",
                run,
            )
        return [(s, bool(d), bool(r), bool(a), bool(o), int(n)) for s, d, r, a, o, n in rows]

    @retried
    async def final_launches(self, run: str) -> set[str]:
        async with self._transaction() as tx:
            rows = await tx.fetch(
                "SELECT launch_request_id FROM campaignkit_followed WHERE run = ?", run
            )
        return {row[0] for row in rows}
