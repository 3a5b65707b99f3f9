"""The memory ledger's state of one run, in a compact shape: the recipients
planned together form one *batch* (contiguous record numbers sharing chunk,
claim and state), so a recipient costs its phone and input position (8 bytes
each) and a slot of the phone index."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Collection, Iterator, Sequence

import attrs

from ._memory_outcomes import RunOutcomes
from ._records import (
    ACCEPTED,
    IN_FLIGHT,
    PLANNED,
    SUPPRESSED,
    Recipient,
    Record,
    RunInfo,
    Skipped,
)

_GOLDEN = 0x9E3779B97F4A7C15
_BITS64 = (1 << 64) - 1
PENDING = 0xFFFF_FFFF
"""The index value of a phone the planner has seen but the run not yet planned."""
_LONG = 1 << 63  # keys of phones too long for an int key (never below it)


class Index:
    """Phone key -> record number, open addressing at most half full."""

    __slots__ = ("_keys", "_mask", "_shift", "_size", "_values")

    def __init__(self, bits: int = 10) -> None:
        self._keys = array("Q", bytes(8 << bits))
        self._values = array("I", bytes(4 << bits))
        self._mask = (1 << bits) - 1
        self._shift = 64 - bits
        self._size = 0

    def _slot(self, key: int) -> int:
        keys, mask = self._keys, self._mask
        index = ((key * _GOLDEN) & _BITS64) >> self._shift
        while keys[index] and keys[index] != key:
            index = (index + 1) & mask
        return index

    def setdefault(self, key: int, value: int) -> int | None:
        """The value of ``key``, or None after adding it with ``value``."""
        slot = self._slot(key)
        if self._keys[slot]:
            return self._values[slot]
        self._keys[slot] = key
        self._values[slot] = value
        self._size += 1
        if self._size * 2 > len(self._keys):
            self._grow()
        return None

    def take(self, key: int, value: int) -> int | None:
        """Set ``key`` to ``value`` if it is absent or pending (then None);
        otherwise its value, unchanged."""
        slot = self._slot(key)
        if self._keys[slot]:
            found = self._values[slot]
            if found != PENDING:
                return found
            self._values[slot] = value
            return None
        self._keys[slot] = key
        self._values[slot] = value
        self._size += 1
        if self._size * 2 > len(self._keys):
            self._grow()
        return None

    def get(self, key: int) -> int | None:
        slot = self._slot(key)
        return self._values[slot] if self._keys[slot] else None

    def put(self, key: int, value: int) -> None:
        slot = self._slot(key)
        if not self._keys[slot]:
            self._keys[slot] = key
            self._size += 1
        self._values[slot] = value
        if self._size * 2 > len(self._keys):
            self._grow()

    def items(self) -> Iterator[tuple[int, int]]:
        """Every key and its value."""
        for key, value in zip(self._keys, self._values, strict=True):
            if key:
                yield key, value

    def _grow(self) -> None:
        keys, values = self._keys, self._values
        bits = 64 - self._shift + 1
        self.__init__(bits)  # type: ignore[misc]
        for key, value in zip(keys, values, strict=True):
            if key:
                self.put(key, value)


@attrs.define(eq=False)
class Batch:
    """Recipients planned together into one chunk: records ``start`` to ``start + len``."""

    chunk: str
    start: int
    size: int
    recipients: tuple[Recipient, ...] | None
    """As planned (in input order); dropped once accepted."""
    state: str = PLANNED
    claim: str | None = None
    launch_request_id: str | None = None
    detail: str | None = None
    updated: float = 0.0
    dead: set[int] = attrs.Factory(set)
    """Offsets of records planned again since, into a later batch."""


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
    long_keys: dict[str, int] = attrs.Factory(dict)
    long_phones: dict[int, str] = attrs.Factory(dict)
    positions: array[int] = attrs.Factory(lambda: array("Q"))
    batches: list[Batch] = attrs.Factory(list)
    starts: array[int] = attrs.Factory(lambda: array("Q"))
    by_chunk: dict[str, list[Batch]] = attrs.Factory(dict)
    chunks: dict[str, tuple[float, bool]] = attrs.Factory(dict)
    """Each chunk's creation time and whether it was enqueued."""
    claims: dict[str, ClaimState] = attrs.Factory(dict)
    skipped: dict[str, dict[int, Skipped]] = attrs.Factory(dict)
    outcomes: RunOutcomes = attrs.Factory(RunOutcomes)

    def key(self, phone: str) -> int:
        digits = phone[1:]
        if len(digits) <= 18 and digits.isdigit():
            return int("1" + digits)
        key = self.long_keys.get(phone)
        if key is None:
            key = self.long_keys[phone] = _LONG + len(self.long_keys)
            self.long_phones[key] = phone
        return key

    def phone(self, key: int) -> str:
        return self.long_phones[key] if key >= _LONG else "+" + str(key)[1:]

    def file(
        self,
        chunk: str,
        recipients: Sequence[Recipient],
        adopt: tuple[str, ...],
        reason: str | None,
        now: float,
    ) -> list[Record]:
        """File ``recipients`` in one batch of ``chunk``, planned, or suppressed
        for ``reason``; the records of those it will not send."""
        held: list[Record] = []
        start = len(self.positions)
        joining: list[Recipient] = []
        for recipient in recipients:
            key = self.key(recipient.phone)
            # New to the run, or only seen by its planner so far: joins.
            number = self.index.take(key, start + len(joining))
            if number is None:
                joining.append(recipient)
                self.positions.append(recipient.position)
            elif number >= start:  # twice in this call: the last one (an upsert)
                joining[number - start] = recipient
                self.positions[number] = recipient.position
            elif (batch := self.batch(number)).state in adopt:
                batch.dead.add(number - batch.start)
                self.index.put(key, start + len(joining))
                joining.append(recipient)
                self.positions.append(recipient.position)
            elif batch.chunk != chunk:
                held.append(self.record(number, recipient.phone))
        if joining:
            batch = Batch(chunk, start, len(joining), tuple(joining), updated=now)
            self.batches.append(batch)
            self.starts.append(start)
            self.by_chunk.setdefault(chunk, []).append(batch)
            if reason is not None:
                batch.state, batch.detail = SUPPRESSED, reason
                held += (self.record(start + i, r.phone) for i, r in enumerate(joining))
        return held

    def batch(self, number: int) -> Batch:
        return self.batches[bisect_right(self.starts, number) - 1]

    def record(self, number: int, phone: str) -> Record:
        batch = self.batch(number)
        offset = number - batch.start
        return Record(
            phone,
            self.positions[number],
            batch.state,
            batch.launch_request_id,
            batch.detail,
            None if batch.recipients is None else batch.recipients[offset].user,
            batch.claim,
        )

    def add(self, phone: str) -> bool:
        """For the planner of the run's one pass: True if ``phone`` is new to the
        run (it is then held as seen, and planned later), False if seen before."""
        return self.index.setdefault(self.key(phone), PENDING) is None

    def current(self, states: set[str]) -> list[tuple[int, str, int]]:
        """``(position, phone, number)`` of the records in ``states``, in input order."""
        # The index holds each phone's current record.
        found = [
            (self.positions[number], self.phone(key), number)
            for key, number in self.index.items()
            if number != PENDING and self.batch(number).state in states
        ]
        found.sort()
        return found

    def accepted(self, launches: Collection[str]) -> dict[str, list[str]]:
        """The phones of the accepted recipients of ``launches``, by launch."""
        phones: dict[str, list[str]] = {launch: [] for launch in launches}
        for key, number in self.index.items() if phones else ():
            batch = self.batch(number) if number != PENDING else None
            if batch is not None and batch.state == ACCEPTED and batch.launch_request_id in phones:
                phones[batch.launch_request_id].append(self.phone(key))
        return phones

    def held(self, phones: Sequence[str]) -> dict[str, tuple[Record, float | None]]:
        """The records of ``phones``, each with when its claim was taken."""
        found: dict[str, tuple[Record, float | None]] = {}
        for phone in phones:
            number = self.index.get(self.key(phone))
            if number is None or number == PENDING:
                continue
            record = self.record(number, phone)
            claim = self.claims.get(record.claim or "")
            found[phone] = (record, None if claim is None else claim.claimed)
        return found
