"""The memory ledger's outcomes: the rules of :mod:`._outcome_store`, kept
in a dict per run (one row per accepted recipient whose outcome is known)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from .._funnel import OutcomeGroup
from ._outcomes import RecipientOutcome, StatusRow, fact_of
from ._records import ACCEPTED

if TYPE_CHECKING:
    from ..webhooks import WebhookEvent
    from ._memory_runs import RunState


@attrs.define(slots=True)
class _Row:
    launch_request_id: str | None = None
    conversation_id: str | None = None
    status: str | None = None
    status_at: float | None = None
    delivered_at: float | None = None
    read_at: float | None = None
    replied_at: float | None = None
    answer: str | None = None
    opted_out_at: float | None = None


@attrs.define
class RunOutcomes:
    """A run's outcomes, by phone, and the launches followed until every
    deployment of theirs was final."""

    rows: dict[str, _Row] = attrs.Factory(dict)
    final: set[str] = attrs.Factory(set)


class MemoryOutcomes:
    """A part of :class:`MemoryLedger`: see :class:`Ledger`'s outcome methods."""

    if TYPE_CHECKING:
        _runs: dict[str, RunState]

        def _run(self, run: str) -> RunState | None: ...
        def _state(self, run: str) -> RunState: ...

    async def record_statuses(
        self, run: str, rows: Sequence[StatusRow], *, final: Sequence[str] = ()
    ) -> None:
        outcomes = self._state(run).outcomes
        kept = outcomes.rows
        for phone, launch, conversation, status, at in rows:
            row = kept.get(phone)
            if row is None:
                kept[phone] = _Row(launch, conversation, status, at)
            elif row.status != status:  # the same status seen again keeps its time
                row.launch_request_id, row.conversation_id = launch, conversation
                row.status, row.status_at = status, at
        outcomes.final.update(final)
        await asyncio.sleep(0)

    async def record_event(self, event: WebhookEvent) -> None:
        found = fact_of(event)
        if found is None:
            return
        self._run("")  # open?
        newest_first = sorted(
            (state for state in self._runs.values() if state.info is not None),
            key=lambda state: (state.info.created, state.info.run) if state.info else (0.0, ""),
            reverse=True,
        )
        for state in newest_first:
            held = state.held([found.phone]).get(found.phone)
            if held is not None and held[0].state == ACCEPTED:
                break
        else:
            return
        row = state.outcomes.rows.setdefault(found.phone, _Row())
        if getattr(row, found.fact) is None:
            setattr(row, found.fact, found.at)
        row.conversation_id = row.conversation_id or found.conversation_id
        row.answer = row.answer or found.answer

    async def outcomes(self, run: str) -> list[RecipientOutcome]:
        state = self._run(run)
        if state is None:
            return []
        return [
            RecipientOutcome.of_row(phone, *attrs.astuple(row, recurse=False))
            for phone, row in sorted(state.outcomes.rows.items())
        ]

    async def outcome_groups(self, run: str) -> list[OutcomeGroup]:
        state = self._run(run)
        if state is None:
            return []
        groups = Counter(
            (
                row.status,
                row.delivered_at is not None,
                row.read_at is not None,
                row.replied_at is not None,
                row.opted_out_at is not None,
            )
            for row in state.outcomes.rows.values()
        )
        return [(*key, n) for key, n in groups.items()]

    async def final_launches(self, run: str) -> set[str]:
        state = self._run(run)
        return set() if state is None else set(state.outcomes.final)
