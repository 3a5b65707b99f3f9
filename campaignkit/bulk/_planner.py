"""Reading a bulk send's input: each item validated, each phone once, in chunks."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
import orjson

from .._input.phones import KEYED_APART, PhoneSet, identity
from .._input.users import InvalidInput, as_user
from .._input.validation import Problems, user_wire
from .._report import DuplicateUser, InvalidUser
from .._wire.body import user_wire_at
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


class Planner:
    """Takes inputs one at a time and hands back full chunks.

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
