"""The memory ledger's outcomes: the rules of :mod:`._outcome_store`, kept
in a dict per run (one row per accepted recipient whose outcome is known)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import attrs

from .._funnel import OutcomeGroup
from ._outcomes import RecipientOutcome, StatusRow, fact_of
from ._records import ACCEPTED
from ._suppression import OPT_OUT, listed_by_outcome

if TYPE_CHECKING:
    from ..webhooks import WebhookEvent
    from ._memory_runs import RunState


Row = tuple[
    str | None,  # launch_request_id
    str | None,  # conversation_id
    str | None,  # status
    float | None,  # status_at
    float | None,  # delivered_at
    float | None,  # read_at
    float | None,  # replied_at
    str | None,  # answer
    float | None,  # opted_out_at
]
"""One recipient's outcome, the columns of the SQL table: a tuple (cheap to
make, and of no concern to the garbage collector), replaced on each change."""

_EMPTY: Row = (None,) * 9
_STATUS, _ANSWER = 2, 7
_FACT_AT = {"delivered_at": 4, "read_at": 5, "replied_at": 6, "opted_out_at": 8}


@attrs.define
class RunOutcomes:
    """A run's outcomes, by phone, and the launches followed until every
    deployment of theirs was final."""

    rows: dict[str, Row] = attrs.Factory(dict)
    final: set[str] = attrs.Factory(set)


class MemoryOutcomes:
    """A part of :class:`MemoryLedger`: see :class:`Ledger`'s outcome methods."""

    if TYPE_CHECKING:
        _runs: dict[str, RunState]

        def _check_open(self) -> None: ...
        def _run(self, run: str) -> RunState | None: ...
        def _state(self, run: str) -> RunState: ...
        async def _add_suppressions(
            self, phones: Sequence[str], reason: str, source: str | None, added: float
        ) -> int: ...

    async def record_statuses(
        self, run: str, rows: Sequence[StatusRow], *, final: Sequence[str] = ()
    ) -> None:
        outcomes = self._state(run).outcomes
        kept = outcomes.rows
        get = kept.get
        for phone, launch, conversation, status, at in rows:
            row = get(phone)
            if row is None:  # the usual case: a recipient's first status
                kept[phone] = (launch, conversation, status, at, None, None, None, None, None)
            elif row[_STATUS] != status:  # the same status seen again keeps its time
                kept[phone] = (launch, conversation, status, at, *row[4:])
        outcomes.final.update(final)
        listed = listed_by_outcome(rows)
        for reason, phones in listed.items():
            await self._add_suppressions(phones, reason, run, time.time())
        await asyncio.sleep(0)

    async def record_event(self, event: WebhookEvent) -> None:
        found = fact_of(event)
        if found is None:
            return
        self._check_open()
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
            state = None
        if found.fact == "opted_out_at":  # listed even when no run of ours sent it
            source = None if state is None or state.info is None else state.info.run
            await self._add_suppressions([found.phone], OPT_OUT, source, time.time())
        if state is None:
            return
        kept = state.outcomes.rows
        row = list(kept.get(found.phone, _EMPTY))
        at = _FACT_AT[found.fact]
        row[at] = found.at if row[at] is None else row[at]
        row[1] = row[1] or found.conversation_id
        row[_ANSWER] = row[_ANSWER] or found.answer
        kept[found.phone] = tuple(row)  # type: ignore[assignment]

    async def launch_phones(self, run: str, launches: Collection[str]) -> dict[str, list[str]]:
        state = self._run(run)
        return {launch: [] for launch in launches} if state is None else state.accepted(launches)

    async def outcomes(self, run: str) -> list[RecipientOutcome]:
        state = self._run(run)
        if state is None:
            return []
        return [
            RecipientOutcome.of_row(phone, *row)
            for phone, row in sorted(state.outcomes.rows.items())
        ]

    async def outcome_groups(self, run: str) -> list[OutcomeGroup]:
        state = self._run(run)
        if state is None:
            return []
        groups = Counter(
            (status, delivered is not None, read is not None, replied is not None, out is not None)
            for _, _, status, _, delivered, read, replied, _, out in state.outcomes.rows.values()
        )
        return [(*key, n) for key, n in groups.items()]

    async def final_launches(self, run: str) -> set[str]:
        state = self._run(run)
        return set() if state is None else set(state.outcomes.final)
