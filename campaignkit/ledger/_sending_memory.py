"""The sending-line rules of the memory ledger (see :mod:`._sending`)."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import orjson

from ._memory_runs import RunState
from ._records import ACCEPTED, AMBIGUOUS, DEFERRED, IN_FLIGHT, PLANNED
from ._sending import DAY, SendingRules, daily_limit_of, deferred_detail, over_budget, spread

_COUNTED = (IN_FLIGHT, ACCEPTED, AMBIGUOUS)


def _key(phone: str) -> int | str:
    """A phone as an int where it fits 64 bits (as ``RunState.claimed_keys`` gives it)."""
    digits = phone[1:]
    return int("1" + digits) if len(digits) <= 18 and digits.isdigit() else phone


@attrs.frozen
class _Taken:
    """A claim, for the daily limit's count of the phones it took."""

    claimed: float
    run: str
    claim: str


class MemorySendingRules(SendingRules):
    """A part of :class:`MemoryLedger`."""

    _runs: dict[str, RunState]

    def __init__(self, **ledger_options: Any) -> None:
        super().__init__(**ledger_options)  # the Ledger's (next in a MemoryLedger's MRO)
        self._options: dict[str, dict[str, Any]] = {}
        self._lines: dict[str, str] = {}
        self._line_load: Counter[str] = Counter()
        self._taken: deque[_Taken] = deque()

    async def save_run_options(self, run: str, options: Mapping[str, Any]) -> None:
        # Through JSON, as the durable ledgers keep them.
        self._options[run] = orjson.loads(orjson.dumps(dict(options)))

    async def run_options(self, run: str) -> dict[str, Any]:
        return dict(self._options.get(run, {}))

    async def assign_lines(self, phones: Sequence[str], lines: Sequence[str]) -> dict[str, str]:
        if not lines:
            return {}
        kept = {p: line for p in phones if (line := self._lines.get(p)) in lines and line}
        assigned = spread([p for p in phones if p not in kept], self._line_load, lines)
        for phone, line in assigned.items():
            if (old := self._lines.get(phone)) is not None:
                self._line_load[old] -= 1
            self._lines[phone] = line
            self._line_load[line] += 1
        return kept | assigned

    def _note_claim(self, run: str, claim: str, now: float) -> None:
        # The claim's phones are read from the run's index when counted.
        self._taken.append(_Taken(now, run, claim))
        while self._taken and self._taken[0].claimed <= now - DAY:
            self._taken.popleft()

    def _counted(self, since: float) -> tuple[set[int | str], float | None]:
        """The phones claimed since ``since`` and not refused, and the oldest claim's time."""
        counted: set[int | str] = set()
        oldest = None
        for taken in self._taken:
            run = self._runs.get(taken.run)
            claim = None if run is None else run.claims.get(taken.claim)
            counts = claim is not None and claim.state in _COUNTED
            if run is None or claim is None or not counts or taken.claimed <= since:
                continue
            oldest = taken.claimed if oldest is None else min(oldest, taken.claimed)
            counted.update(run.claimed_keys(taken.claim))
        return counted, oldest

    def _defer_over_budget(self, run: str, state: RunState, chunk: str, now: float) -> None:
        """Before a claim: file the chunk's planned recipients past the run's
        daily limit as deferred, so that the claim leaves them."""
        limit = daily_limit_of(self._options.get(run, {}))
        if limit is None:
            return
        planned = sorted(
            (
                (recipient.position, recipient.phone, batch, offset)
                for batch in state.by_chunk.get(chunk, ())
                if batch.state == PLANNED and batch.recipients is not None
                for offset, recipient in enumerate(batch.recipients)
                if offset not in batch.dead
            ),
            key=lambda item: (item[0], item[1]),  # input order (batches do not compare)
        )
        counted, oldest = self._counted(now - DAY)
        keyed = {_key(phone): phone for _, phone, _, _ in planned}
        deferred = set(over_budget(list(keyed), counted, len(counted), limit))
        if not deferred:
            return
        moved = [(batch, offset) for _, phone, batch, offset in planned if _key(phone) in deferred]
        detail = deferred_detail(limit, None if oldest is None else oldest + DAY)
        state.move(chunk, moved, DEFERRED, detail, now)
