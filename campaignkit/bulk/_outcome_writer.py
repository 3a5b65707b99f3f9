"""What following a run writes: each launch's latest statuses, matched to
its recipients, and the writes of the launches that finish together grouped
into one transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter
from typing import Final

from .._wire.decode import StatusEntry
from ..errors import LedgerError
from ..ledger import Ledger, StatusRow
from ..status import KNOWN_WIRE_STATUSES
from ._launch_phones import LaunchPhones

_CELLPHONE = attrgetter("cellphone")
_WIRE_VALUES: Final = {
    spelling: status.value for spelling, status in KNOWN_WIRE_STATUSES.items() if status
}
"""The value kept for each spelling of a known status (an unknown one is kept as read)."""


class OutcomeWriter:
    """Writes the launches' outcomes, grouping the writes that wait on one
    another into one transaction (a durable ledger commits each to disk):
    whoever takes the turn writes every row handed in by then."""

    def __init__(self, ledger: Ledger, run: str) -> None:
        self._ledger = ledger
        self._run = run
        self._turn = asyncio.Lock()
        self._open: _Group | None = None

    async def write(self, rows: Sequence[StatusRow], final: Sequence[str]) -> None:
        """Return once ``rows`` are written (``final`` launches marked with them)."""
        group = self._open = self._open or _Group()
        group.rows += rows
        group.final += final
        async with self._turn:
            if group is self._open:  # not written yet: ours to write
                self._open = None
                try:
                    await self._ledger.record_statuses(self._run, group.rows, final=group.final)
                except BaseException as exc:
                    group.failure = exc
                    raise
            elif group.failure is not None:
                raise LedgerError(
                    f"the outcomes of run {self._run!r} could not be written"
                ) from group.failure


class _Group:
    __slots__ = ("failure", "final", "rows")

    def __init__(self) -> None:
        self.rows: list[StatusRow] = []
        self.final: list[str] = []
        self.failure: BaseException | None = None


class LaunchOutcomes:
    """One launch being followed: the latest entry of each of its
    deployments (by cellphone) since the last write, with when it was seen,
    each matched to its recipient when written."""

    def __init__(self, writer: OutcomeWriter, launch: str, phones: Sequence[str]) -> None:
        self._writer = writer
        self._launch = launch
        self._recipients = LaunchPhones(phones)
        self.latest: dict[str | None, StatusEntry] = {}
        """By cellphone: the entry (its status the new one, as on the wire).
        Entries are not tracked by the garbage collector: holding them costs
        it nothing."""
        self.seen: dict[str | None, float] = {}
        """By cellphone, in the same order: when the entry was read."""
        self.unmatched = 0

    def add(self, entries: list[StatusEntry], seen: float) -> None:
        """Hold the changed ``entries`` of a poll made at ``seen``."""
        # In C, and no object made for a change (benchmarks row 15: 300,000
        # of them): two dicts rather than one of (entry, time) tuples, which
        # the garbage collector would walk again and again while held.
        cellphones = list(map(_CELLPHONE, entries))
        self.latest.update(zip(cellphones, entries, strict=True))
        self.seen.update(zip(cellphones, repeat(seen), strict=False))

    async def write(self, *, final: bool = False) -> None:
        """Write the changes held (and, with ``final``, mark the launch final)."""
        latest, seen, self.latest, self.seen = self.latest, self.seen, {}, {}
        launch = self._launch
        rows = [
            StatusRow(
                phone,
                launch,
                entry.conversation_id or None,
                _WIRE_VALUES.get(entry.status) or str(entry.status),
                at,
            )
            for phone, entry, at in zip(
                self._recipients.phones_of(latest), latest.values(), seen.values(), strict=True
            )
            if phone is not None
        ]
        self.unmatched += len(latest) - len(rows)
        await self._writer.write(rows, [launch] if final else ())
