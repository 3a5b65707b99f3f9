"""The memory ledger's suppression list: a dict by phone."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence

from ._memory_runs import RunState
from ._records import PLANNED, SUPPRESSED, Recipient
from ._suppression import Suppression, SuppressionList


class MemorySuppressions(SuppressionList):
    """A part of :class:`MemoryLedger`."""

    _suppressions: dict[str, Suppression]

    @abc.abstractmethod
    def _check_open(self) -> None: ...

    def _list(self) -> dict[str, Suppression]:
        self._check_open()
        return self._suppressions

    def _entries(self, phones: Iterable[str]) -> dict[str, Suppression]:
        """The entries of those of ``phones`` on the list, by phone."""
        kept = self._list()
        return {phone: kept[phone] for phone in phones if phone in kept} if kept else {}

    def _suppress_late(self, state: RunState, chunk: str, now: float) -> None:
        """File suppressed the planned recipients of ``chunk`` whose numbers
        were listed since they were planned."""
        kept = self._list()
        if not kept:
            return
        late: dict[str, list[Recipient]] = {}  # by reason
        for batch in state.by_chunk.get(chunk, ()):
            if batch.state != PLANNED or batch.recipients is None:
                continue
            for i, recipient in enumerate(batch.recipients):
                entry = kept.get(recipient.phone)
                if entry is not None and entry.added >= batch.updated and i not in batch.dead:
                    late.setdefault(entry.reason, []).append(recipient)
        for reason, group in late.items():
            state.file(chunk, group, (PLANNED,), (SUPPRESSED, reason), now)

    async def _add_suppressions(
        self, phones: Sequence[str], reason: str, source: str | None, added: float
    ) -> int:
        kept = self._list()
        new = [phone for phone in phones if phone not in kept]
        kept.update((phone, Suppression(phone, reason, source, added)) for phone in new)
        return len(new)

    async def _remove_suppressions(self, phones: Sequence[str]) -> int:
        kept = self._list()
        return sum(kept.pop(phone, None) is not None for phone in phones)

    async def _find_suppressions(self, phones: Sequence[str]) -> dict[str, Suppression]:
        return self._entries(phones)

    async def suppressions(self, *, page_size: int = 10_000) -> AsyncIterator[Suppression]:
        kept = self._list()
        ordered = sorted(kept)
        for start in range(0, len(ordered), page_size):
            for phone in ordered[start : start + page_size]:
                if (entry := kept.get(phone)) is not None:  # not removed meanwhile
                    yield entry
            await asyncio.sleep(0)
