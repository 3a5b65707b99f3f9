"""The memory ledger's state of one run, in a compact shape: the recipients
planned together form one *batch* (contiguous record numbers sharing chunk,
claim and state). A recipient costs its phone's 8-byte key, a 4-byte slot of
the phone index (at most half full) and, when its batch's input positions are
not one unbroken run, its position (8 bytes): about 16 to 24 bytes in all.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from itertools import pairwise, repeat

import attrs

from .._input.phones import int_keys
from ._memory_index import Index
from ._records import ACCEPTED, IN_FLIGHT, PLANNED, Recipients, Record, RunInfo, Skipped

_LONG = 1 << 63  # keys of phones too long for an int key (never below it)


def compact_positions(given: Sequence[int]) -> Sequence[int]:
    """``given`` as a ``range`` when they are one unbroken run (a chunk of
    an input without invalid or duplicate items), which costs no memory a
    recipient, else as an array."""
    positions = given if isinstance(given, array) else array("Q", given)
    if positions and positions[-1] - positions[0] == len(positions) - 1:
        run = range(positions[0], positions[-1] + 1)
        if positions == array("Q", run):
            return run
    return positions


OutcomeRow = tuple[
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


@attrs.define(eq=False)
class Batch:
    """Recipients planned together into one chunk: records ``start`` to ``start + size``."""

    chunk: str
    start: int
    size: int
    positions: Sequence[int]
    """Each record's input position (a ``range`` or an array)."""
    recipients: Recipients | None
    """As planned; dropped once accepted."""
    state: str = PLANNED
    claim: str | None = None
    launch_request_id: str | None = None
    detail: str | None = None
    updated: float = 0.0
    dead: set[int] = attrs.Factory(set)
    """Offsets of records planned again since, into a later batch."""

    @property
    def live(self) -> int:
        return self.size - len(self.dead)


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


@attrs.define(eq=False)
class RunState:
    info: RunInfo | None = None
    """None while recipients were planned but the run not started (as in SQL)."""
    input_pass: str = ""
    index: Index = attrs.Factory(Index)
    pending: dict[str, int] = attrs.Factory(dict)
    """The phones the run's planner has seen and the run not yet planned, with
    their keys (worked out once a phone)."""
    long_keys: dict[str, int] = attrs.Factory(dict)
    long_phones: dict[int, str] = attrs.Factory(dict)
    batches: list[Batch] = attrs.Factory(list)
    starts: array[int] = attrs.Factory(lambda: array("Q"))
    by_chunk: dict[str, list[Batch]] = attrs.Factory(dict)
    chunks: dict[str, tuple[float, bool]] = attrs.Factory(dict)
    """Each chunk's creation time and whether it was enqueued."""
    claims: dict[str, ClaimState] = attrs.Factory(dict)
    skipped: dict[str, dict[int, Skipped]] = attrs.Factory(dict)
    outcomes: dict[str, OutcomeRow] = attrs.Factory(dict)
    """The outcomes known, by phone."""
    final: set[str] = attrs.Factory(set)
    """The launches followed until every deployment of theirs was final."""

    def key(self, phone: str) -> int:
        digits = phone[1:]
        if len(digits) <= 18 and digits.isdigit():
            return int("1" + digits)
        return self.long_key(phone)

    def keys_of_planned(self, phones: Sequence[str]) -> list[int]:
        """The keys of ``phones`` being planned: those the run's planner held
        pending, no longer pending, the others worked out."""
        if not self.pending:
            return int_keys(phones) or [*map(self.key, phones)]
        keys = [*map(self.pending.pop, phones, repeat(0))]
        if 0 in keys:
            keys = [key or self.key(phone) for key, phone in zip(keys, phones, strict=True)]
        return keys

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
            None if batch.recipients is None else batch.recipients.users[offset],
            batch.claim,
        )

    def upsert(
        self,
        chunk: str,
        columns: Recipients,
        state: str,
        detail: str | None,
        replace: Collection[str],
        now: float,
    ) -> list[Record]:
        """File ``columns`` in one batch of ``chunk`` (see ``StoreTx.upsert``);
        the records kept, of those held in another chunk."""
        kept: list[Record] = []
        index = self.index
        start = len(index.keys)
        phones = columns.phones
        keys = self.keys_of_planned(phones)
        # The offsets of the recipients filed; None while that is all of them
        # so far, in order (a chunk of send_bulk's planner, new to the run: its
        # columns become the batch's as they are, filed in one loop).
        joining: list[int] | None = None
        for offset in range(index.add_new(keys), len(keys)):
            phone, key = phones[offset], keys[offset]
            found = index.add(key)
            if not found:  # new to the run: now filed
                if joining is not None:
                    joining.append(offset)
                continue
            if joining is None:
                joining = list(range(offset))
            number = found - 1
            if number >= start:  # twice in this call: the last one (an upsert)
                joining[number - start] = offset
                continue
            batch = self.batch(number)
            if batch.state in replace:
                batch.dead.add(number - batch.start)
                index.new_record(index.find(key)[0], key)
                joining.append(offset)
            elif batch.chunk != chunk:
                kept.append(self.record(number, phone))
        if joining is not None:
            columns = Recipients(
                [columns.phones[i] for i in joining],
                array("Q", [columns.positions[i] for i in joining]),
                [columns.users[i] for i in joining],
            )
        if columns:
            batch = self._new_batch(chunk, start, columns, now)
            batch.state, batch.detail = state, detail
        return kept

    def split(self, moved: Iterable[tuple[Batch, int]], now: float) -> list[Batch]:
        """Move the records at ``(batch, offset)`` into new batches (one a
        batch they leave, which they take after): their new records, now
        their phones' current ones."""
        by_batch: dict[Batch, list[int]] = {}
        for batch, offset in moved:
            by_batch.setdefault(batch, []).append(offset)
        made = []
        for batch, offsets in by_batch.items():
            assert batch.recipients is not None
            start = len(self.index.keys)
            phones: list[str] = []
            positions: array[int] = array("Q")
            users: list[str] = []
            for offset in offsets:
                phone = batch.recipients.phones[offset]
                batch.dead.add(offset)
                key = self.key(phone)
                self.index.new_record(self.index.find(key)[0], key)
                phones.append(phone)
                positions.append(batch.positions[offset])
                users.append(batch.recipients.users[offset])
            new = self._new_batch(batch.chunk, start, Recipients(phones, positions, users), now)
            new.state, new.claim = batch.state, batch.claim
            new.launch_request_id, new.detail = batch.launch_request_id, batch.detail
            made.append(new)
        return made

    def in_chunk(self, chunk: str, states: Collection[str]) -> list[Batch]:
        """The batches of ``chunk`` in ``states`` holding a live record."""
        return [b for b in self.by_chunk.get(chunk, ()) if b.state in states and b.live]

    def of_claim(self, token: str) -> list[Batch]:
        """The batches that claim ``token`` took."""
        claim = self.claims.get(token)
        if claim is None:
            return []
        return [b for b in self.by_chunk.get(claim.chunk, ()) if b.claim == token]

    def _new_batch(
        self,
        chunk: str,
        start: int,
        recipients: Recipients,
        now: float,
    ) -> Batch:
        kept = compact_positions(recipients.positions)
        if kept is not recipients.positions:
            recipients = Recipients(recipients.phones, kept, recipients.users)
        batch = Batch(chunk, start, len(recipients), kept, recipients, updated=now)
        self.batches.append(batch)
        self.starts.append(start)
        self.by_chunk.setdefault(chunk, []).append(batch)
        return batch

    def add(self, phone: str) -> bool:
        """For the planner of the run's one pass: True if ``phone`` is new to the
        run (it is then held as seen, and planned later), False if seen before."""
        if phone in self.pending:
            return False
        key = self.key(phone)
        if self.index.find(key)[1]:
            return False
        self.pending[phone] = key
        return True

    def add_each(self, phones: Sequence[str]) -> list[bool]:
        """:meth:`add` of each phone in turn: what each returned."""
        keys = int_keys(phones)
        if keys is None:
            return [*map(self.add, phones)]
        pending, added = self.pending, []
        for phone, key, found in zip(phones, keys, self.index.found_each(keys), strict=True):
            new = not found and phone not in pending
            if new:
                pending[phone] = key
            added.append(new)
        return added

    def current(self, states: set[str]) -> list[tuple[int, str, int]]:
        """``(position, phone, number)`` of the records in ``states``, in input order."""
        found = []
        for key, number in self.index.items():
            batch = self.batch(number)
            if batch.state in states:
                found.append((batch.positions[number - batch.start], self.phone(key), number))
        found.sort()
        return found

    def by_launch(self, state: str, launches: Collection[str]) -> dict[str, list[str]]:
        """The phones of the recipients in ``state`` of ``launches``, by launch."""
        phones: dict[str, list[str]] = {}
        for key, number in self.index.items() if launches else ():
            batch = self.batch(number)
            launch = batch.launch_request_id
            if batch.state == state and launch is not None and launch in launches:
                phones.setdefault(launch, []).append(self.phone(key))
        return phones

    def keys_of(self, batches: Iterable[Batch]) -> Iterator[int | str]:
        """The phones of the live records of ``batches``: ints where they fit
        64 bits (the index's keys), else their text."""
        keys, long_phones = self.index.keys, self.long_phones
        for batch in batches:
            dead = batch.dead
            for offset, key in enumerate(keys[batch.start : batch.start + batch.size]):
                if offset not in dead:
                    yield long_phones[key] if key >= _LONG else key

    def set(
        self, batches: Iterable[Batch], to: str, fields: Mapping[str, str | None], now: float
    ) -> int:
        """Move ``batches`` whole to ``to``, setting ``fields``; their live records."""
        moved = 0
        for batch in batches:
            batch.state, batch.updated = to, now
            for name, value in fields.items():
                setattr(batch, name, value)
            if to == ACCEPTED:
                batch.recipients = None  # sent: the memory ledger keeps no users of them
            moved += batch.live
        return moved

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


def live(batches: Iterable[Batch]) -> Iterator[tuple[Batch, int, str, int]]:
    """``(batch, offset, phone, position)`` of the live records of ``batches``
    that keep their users."""
    for batch in batches:
        if batch.recipients is None:
            continue
        dead = batch.dead
        for offset, phone in enumerate(batch.recipients.phones):
            if offset not in dead:
                yield batch, offset, phone, batch.positions[offset]


def claimed(batches: Sequence[Batch]) -> Recipients:
    """The live recipients of ``batches``, in input order."""
    first = batches[0].recipients
    assert first is not None
    if len(batches) == 1 and not batches[0].dead and _ascending(first.positions):
        return first  # a chunk planned whole, as send_bulk's are: nothing to copy
    found = sorted(
        ((position, phone, batch, offset) for batch, offset, phone, position in live(batches)),
        key=lambda item: (item[0], item[1]),  # input order (batches do not compare)
    )
    users = [batch.recipients.users[offset] for _, _, batch, offset in found if batch.recipients]
    return Recipients([f[1] for f in found], [f[0] for f in found], users)


def _ascending(positions: Sequence[int]) -> bool:
    return isinstance(positions, range) or all(a < b for a, b in pairwise(positions))
