"""Reading a bulk send's input: each item validated, each phone once, in chunks."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from itertools import compress
from typing import Any, Final, Protocol

import attrs
import orjson

from .._input.phones import KEYED_APART, PhoneSet, identity
from .._input.users import InvalidInput, as_user
from .._input.validation import Problems, user_wire
from .._report import DuplicateUser, InvalidUser
from .._wire.body import WiredUsers, user_wire_at, users_wired
from ..ledger import Recipients, Skipped
from ..models import User


@attrs.define
class PlannedChunk:
    """Up to ``chunk_size`` valid users with distinct phones, in input order."""

    index: int
    wires: list[str] = attrs.field(repr=False)
    """Each user's wire JSON. Text, not the wire dicts: a chunk lives through
    many collections of the garbage collector while it is planned, queued and
    sent, and its dicts (three a user) were what promoted most objects to its
    oldest generation, whose full collections then cost a bulk send more than
    its ledger (row 6n)."""
    phones: list[str] = attrs.field(repr=False)
    users: tuple[User, ...] = attrs.field(repr=False)
    positions: array[int] = attrs.field(repr=False)
    deferred: dict[str, str] = attrs.field(factory=dict, repr=False)
    """The phones of those the send's rules cannot send now, with why (the
    ledger files them deferred)."""

    @property
    def body(self) -> bytes:
        """The request body of the whole chunk."""
        return ('{"users":[' + ",".join(self.wires) + "]}").encode()

    @property
    def recipients(self) -> Recipients:
        """The chunk as the ledger files it."""
        return Recipients(self.phones, self.positions, self.wires)


class SeenPhones(Protocol):
    def add(self, phone: str, /) -> bool:
        """Add ``phone``; False if it was already there."""
        ...

    def add_each(self, phones: Sequence[str], /) -> list[bool]:
        """:meth:`add` of each phone in turn: what each returned."""
        ...


_ONE_AT_A_TIME: Final = 16
"""Inputs :meth:`Planner.take_many` takes one at a time, not halved again,
when they are not all common users."""


class Planner:
    """Takes inputs, one at a time or in batches, and hands back full chunks.

    An input that is not a valid user goes to ``invalid``, a person seen
    before (the same :class:`~campaignkit.Phone`) to ``duplicates``; neither
    is sent. A user ``defer`` (given its number and the user) gives a reason
    for (e.g. no zone to hold a send window in) joins its chunk's ``deferred``.
    The seen-phone set (``seen``, a :class:`PhoneSet` by default: about 16
    bytes a phone) is the only structure of its own that grows with the input.
    """

    def __init__(
        self,
        chunk_size: int,
        *,
        seen: SeenPhones | None = None,
        prepare: Callable[[User], tuple[User | None, str | None]] | None = None,
        defer: Callable[[str, User], str | None] | None = None,
    ) -> None:
        self.chunk_size = chunk_size
        self._prepare = prepare
        self._defer = defer
        self.total = 0
        self.invalid: list[InvalidUser] = []
        self.duplicates: list[DuplicateUser] = []
        self._drained = (0, 0)
        self._seen: SeenPhones = PhoneSet() if seen is None else seen
        self._chunks = 0
        self._new_buffers()

    def _new_buffers(self) -> None:
        self._wires: list[str] = []
        self._phones: list[str] = []
        self._users: list[User] = []
        self._positions: array[int] = array("Q")
        self._deferred: dict[str, str] = {}

    @property
    def room(self) -> int:
        """How many more users the chunk being built takes."""
        return self.chunk_size - len(self._wires)

    def take_many(self, items: Sequence[Any]) -> PlannedChunk | None:
        """File ``items`` (no more than :attr:`room`) exactly as :meth:`take`
        files each in turn; the chunk they complete (with the last of them),
        if they do.

        Common users (every item a :class:`~campaignkit.User` whose fields
        need no reading) are checked and written a column at a time, in C;
        items that are not all so are halved until they are, or few enough
        to take one at a time. A send with a ``prepare`` (a send window's
        zones) takes them one at a time: it calls back into the caller's
        code, which may raise at any item.
        """
        if len(items) > self.room:
            raise ValueError(f"{len(items)} items for a chunk with room for {self.room}")
        if not items:
            return None
        if self._prepare is None and (wired := users_wired(items)) is not None:
            return self._take_common(items, wired)
        if self._prepare is not None or len(items) <= _ONE_AT_A_TIME:
            chunk = None
            for item in items:
                chunk = self.take(item)
            return chunk
        half = len(items) // 2
        self.take_many(items[:half])  # fewer than the room: completes no chunk
        return self.take_many(items[half:])

    def _take_common(self, users: Sequence[Any], wired: WiredUsers) -> PlannedChunk | None:
        start = self.total
        self.total += len(users)
        codes, cellphones = wired.country_codes, wired.cellphones
        numbers = [*map(str.__add__, codes, cellphones)]
        phones = numbers if KEYED_APART.isdisjoint(codes) else [*map(identity, codes, cellphones)]
        added = self._seen.add_each(phones)
        positions: Sequence[int] = range(start, start + len(users))
        wires = wired.wires
        if False in added:
            self.duplicates += (
                DuplicateUser(start + offset, phones[offset], users[offset])
                for offset, new in enumerate(added)
                if not new
            )
            phones = [*compress(phones, added)]
            numbers = [*compress(numbers, added)]
            users = [*compress(users, added)]
            positions = [*compress(positions, added)]
            wires = [*compress(wires, added)]
        if self._defer is not None:
            for phone, number, user in zip(phones, numbers, users, strict=True):
                # As take() asks: of the number as the service gets it.
                if (why := self._defer(number, user)) is not None:
                    self._deferred[phone] = why
        self._wires += wires
        self._phones += phones
        self._users += users
        self._positions.extend(positions)
        return self.flush() if len(self._wires) == self.chunk_size else None

    def take(self, item: Any) -> PlannedChunk | None:
        """File one input; the chunk it completes, if it does."""
        position = self.total
        self.total += 1
        if isinstance(item, InvalidInput):
            self.invalid.append(InvalidUser(position, item.reason, item.row, item))
            return None
        user, reason = as_user(item)
        if user is not None and self._prepare is not None:
            user, reason = self._prepare(user)  # e.g. its time zone checked
        entry = None
        if user is not None:
            problems: Problems = []
            entry = user_wire_at(user, position, problems)
            if entry is None:
                reason = "; ".join(f"{path}: {message}" for path, message in problems)
        if entry is None or user is None:
            self.invalid.append(InvalidUser(position, reason or "invalid", None, item))
            return None
        code, cellphone = entry["country_code"], entry["cellphone"]
        phone = identity(code, cellphone) if code in KEYED_APART else code + cellphone
        if not self._seen.add(phone):
            self.duplicates.append(DuplicateUser(position, phone, user))
            return None
        # Asked of the number as the service gets it (the key may be another form of it).
        if self._defer is not None and (why := self._defer(code + cellphone, user)) is not None:
            self._deferred[phone] = why
        self._wires.append(orjson.dumps(entry).decode())
        self._phones.append(phone)
        self._users.append(user)
        self._positions.append(position)
        return self.flush() if len(self._wires) == self.chunk_size else None

    def flush(self) -> PlannedChunk | None:
        """The chunk being built, however small (None if empty)."""
        if not self._wires:
            return None
        chunk = PlannedChunk(
            self._chunks,
            self._wires,
            self._phones,
            tuple(self._users),
            self._positions,
            self._deferred,
        )
        self._chunks += 1
        self._new_buffers()
        return chunk

    def drain_skipped(self) -> list[Skipped]:
        """The invalid and duplicate inputs filed since the last drain, for a ledger."""
        invalid, duplicates = self._drained
        self._drained = (len(self.invalid), len(self.duplicates))
        skipped = [
            Skipped(item.position, "invalid", None, item.reason, item.row, _json(item.value))
            for item in self.invalid[invalid:]
        ]
        skipped += [
            Skipped(item.position, "duplicate", item.phone, None, None, _user_json(item.user))
            for item in self.duplicates[duplicates:]
        ]
        return skipped


def _json(value: Any) -> str | None:
    """``value`` as JSON when it is plain data (a dict of the input), else None."""
    if isinstance(value, User):
        return _user_json(value)
    try:
        return orjson.dumps(value).decode() if isinstance(value, dict | Sequence) else None
    except TypeError:
        return None


def _user_json(user: User) -> str | None:
    problems: Problems = []
    wire = user_wire(user, "", problems)
    return None if wire is None else orjson.dumps(wire).decode()
