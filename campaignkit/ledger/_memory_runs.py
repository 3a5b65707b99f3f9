"""The memory ledger's state of one run, in a compact shape: the recipients
planned together form one *batch* (contiguous record numbers sharing chunk,
claim and state). A recipient costs its phone's 8-byte key, a 4-byte slot of
the phone index (at most half full) and, when its batch's input positions are
not one unbroken run, its position (8 bytes): about 16 to 24 bytes in all.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence

import attrs

from ._records import IN_FLIGHT, PLANNED, Recipient, Record, RunInfo, Skipped

_GOLDEN = 0x9E3779B97F4A7C15
_BITS64 = (1 << 64) - 1
_LONG = 1 << 63  # keys of phones too long for an int key (never below it)


class Index:
    """Each record's phone key (``keys``, by record number) and, for each
    phone, its current record: an open-addressing table of record numbers + 1
    (0 is empty), at most half full, that reads the keys it compares from
    ``keys``."""

    __slots__ = ("_mask", "_shift", "_size", "_table", "keys")

    def __init__(self, bits: int = 10) -> None:
        self.keys = array("Q")
        self._table = array("I", bytes(4 << bits))
        self._mask = (1 << bits) - 1
        self._shift = 64 - bits
        self._size = 0

    def find(self, key: int) -> tuple[int, int]:
        """Where ``key`` is, or the empty slot where it would go, and its
        current record number + 1 (0 if it has none)."""
        table, keys, mask = self._table, self.keys, self._mask
        index = ((key * _GOLDEN) & _BITS64) >> self._shift
        while (found := table[index]) and keys[found - 1] != key:
            index = (index + 1) & mask
        return index, found

    def get(self, key: int) -> int | None:
        """The current record number of ``key``."""
        found = self.find(key)[1]
        return found - 1 if found else None

    def new_record(self, slot: int, key: int) -> int:
        """A new record of ``key`` (``slot`` is :meth:`find`'s answer for it),
        now its current one: its number."""
        keys = self.keys
        keys.append(key)
        number = len(keys) - 1
        table = self._table
        if not table[slot]:
            self._size += 1
        table[slot] = number + 1
        if self._size * 2 > len(table):
            self._grow()
        return number

    def items(self) -> Iterator[tuple[int, int]]:
        """Every key and its current record number."""
        keys = self.keys
        for found in self._table:
            if found:
                yield keys[found - 1], found - 1

    def _grow(self) -> None:
        old = self._table
        bits = 64 - self._shift + 1
        self._table = table = array("I", bytes(4 << bits))
        self._mask = mask = (1 << bits) - 1
        self._shift = shift = 64 - bits
        keys = self.keys
        for found in old:
            if found:
                index = ((keys[found - 1] * _GOLDEN) & _BITS64) >> shift
                while table[index]:
                    index = (index + 1) & mask
                table[index] = found


def compact_positions(positions: array[int]) -> Sequence[int]:
    """``positions`` as a ``range`` when they are one unbroken run (a chunk of
    an input without invalid or duplicate items), which costs no memory a
    recipient."""
    if positions and positions[-1] - positions[0] == len(positions) - 1:
        run = range(positions[0], positions[-1] + 1)
        if positions == array("Q", run):
            return run
    return positions


@attrs.define(eq=False)
class Batch:
    """Recipients planned together into one chunk: records ``start`` to ``start + size``."""

    chunk: str
    start: int
    size: int
    positions: Sequence[int]
    """Each record's input position (a ``range`` or an array)."""
    recipients: tuple[Recipient, ...] | None
    """As planned (in input order); dropped once accepted."""
    state: str = PLANNED
    claim: str | None = None
    launch_request_id: str | None = None
    detail: str | None = None
    updated: float = 0.0
    dead: set[int] | None = None
    """Offsets of records planned again since, into a later batch."""

    @property
    def live(self) -> int:
        return self.size - (len(self.dead) if self.dead else 0)

    def kill(self, offset: int) -> None:
        if self.dead is None:
            self.dead = set()
        self.dead.add(offset)


@attrs.define(eq=False)
class ClaimState:
    chunk: str
    owner: str
    size: int
    claimed: float
    expires: float
    state: str = IN_FLIGHT
    ack: str | None = None
    detail: str | None = None
    batches: list[Batch] = attrs.Factory(list)


@attrs.define(eq=False)
class RunState:
    info: RunInfo | None = None
    """None while recipients were planned but the run not started (as in SQL)."""
    input_pass: str = ""
    index: Index = attrs.Factory(Index)
    pending: set[int] = attrs.Factory(set)
    """Keys of phones the run's planner has seen and the run not yet planned."""
    long_keys: dict[str, int] = attrs.Factory(dict)
    long_phones: dict[int, str] = attrs.Factory(dict)
    batches: list[Batch] = attrs.Factory(list)
    starts: array[int] = attrs.Factory(lambda: array("Q"))
    by_chunk: dict[str, list[Batch]] = attrs.Factory(dict)
    chunks: dict[str, tuple[float, bool]] = attrs.Factory(dict)
    """Each chunk's creation time and whether it was enqueued."""
    claims: dict[str, ClaimState] = attrs.Factory(dict)
    skipped: dict[str, dict[int, Skipped]] = attrs.Factory(dict)

    def key(self, phone: str) -> int:
        digits = phone[1:]
        if len(digits) <= 18 and digits.isdigit():
            return int("1" + digits)
        return self.long_key(phone)

    def long_key(self, phone: str) -> int:
        key = self.long_keys.get(phone)
        if key is None:
            key = self.long_keys[phone] = _LONG + len(self.long_keys)
            self.long_phones[key] = phone
        return key

    def phone(self, key: int) -> str:
        return self.long_phones[key] if key >= _LONG else "+" + str(key)[1:]

    def batch(self, number: int) -> Batch:
        return self.batches[bisect_right(self.starts, number) - 1]

    def record(self, number: int, phone: str) -> Record:
        batch = self.batch(number)
        offset = number - batch.start
        return Record(
            phone,
            batch.positions[offset],
            batch.state,
            batch.launch_request_id,
            batch.detail,
            None if batch.recipients is None else batch.recipients[offset].user,
            batch.claim,
        )

    def plan(
        self, chunk: str, recipients: Sequence[Recipient], adopt: tuple[str, ...], now: float
    ) -> list[Record]:
        """File ``recipients`` as a new batch of ``chunk`` (see ``Ledger.plan``);
        a recipient whose record is in a state not in ``adopt`` is held."""
        held: list[Record] = []
        index, pending = self.index, self.pending
        start = len(index.keys)
        joining: list[Recipient] = []
        positions: array[int] = array("Q")
        for recipient in recipients:
            key = self.key(recipient.phone)
            slot, found = index.find(key)
            number = found - 1
            if not found:  # new to the run, or only seen by its planner so far
                pending.discard(key)
            elif number >= start:  # twice in this call: the last one (an upsert)
                joining[number - start] = recipient
                positions[number - start] = recipient.position
                continue
            elif (batch := self.batch(number)).state in adopt:
                batch.kill(number - batch.start)
            else:
                if batch.chunk != chunk:
                    held.append(self.record(number, recipient.phone))
                continue
            index.new_record(slot, key)
            joining.append(recipient)
            positions.append(recipient.position)
        if joining:
            size, kept = len(joining), compact_positions(positions)
            batch = Batch(chunk, start, size, kept, tuple(joining), updated=now)
            self.batches.append(batch)
            self.starts.append(start)
            self.by_chunk.setdefault(chunk, []).append(batch)
        return held

    def add(self, phone: str) -> bool:
        """For the planner of the run's one pass: True if ``phone`` is new to the
        run (it is then held as seen, and planned later), False if seen before."""
        key = self.key(phone)
        if key in self.pending or self.index.find(key)[1]:
            return False
        self.pending.add(key)
        return True

    def current(self, states: set[str]) -> list[tuple[int, str, int]]:
        """``(position, phone, number)`` of the records in ``states``, in input order."""
        found = []
        for key, number in self.index.items():
            batch = self.batch(number)
            if batch.state in states:
                found.append((batch.positions[number - batch.start], self.phone(key), number))
        found.sort()
        return found

    def held(self, phones: Sequence[str]) -> dict[str, tuple[Record, float | None]]:
        """The records of ``phones``, each with when its claim was taken."""
        found: dict[str, tuple[Record, float | None]] = {}
        for phone in phones:
            number = self.index.get(self.key(phone))
            if number is None:
                continue
            record = self.record(number, phone)
            claim = self.claims.get(record.claim or "")
            found[phone] = (record, None if claim is None else claim.claimed)
        return found
