"""The memory ledger's phone index: each record's phone key, and for each
phone its current record, in arrays (about 16 bytes a phone)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence

from .._input.phones import slot_hashes


class Index:
    """Each record's phone key (``keys``, by record number) and, for each
    phone, its current record: an open-addressing table of record numbers + 1
    (0 is empty), at most half full, that reads the keys it compares from
    ``keys``."""

    __slots__ = ("_mask", "_size", "_table", "keys")

    def __init__(self, bits: int = 10) -> None:
        self.keys = array("Q")
        self._table = array("I", bytes(4 << bits))
        self._mask = (1 << bits) - 1
        self._size = 0

    def find(self, key: int) -> tuple[int, int]:
        """Where ``key`` is, or the empty slot where it would go, and its
        current record number + 1 (0 if it has none)."""
        table, keys, mask = self._table, self.keys, self._mask
        index = hash((key,)) & mask  # slot_hashes' hash of one key
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

    def add(self, key: int) -> int:
        """``key``'s current record number + 1, if it has one; else 0, and it
        has a new record, now its current one (:meth:`find` and
        :meth:`new_record` in one call)."""
        index, found = self.find(key)
        if not found:
            self.new_record(index, key)
        return found

    def add_new(self, keys: Sequence[int]) -> int:
        """:meth:`add` of each key in turn while it is new: how many were (a
        new record each, numbered in turn). One loop for a chunk new to the
        run, without a call a key."""
        table, records, mask = self._table, self.keys, self._mask
        for count, (key, hashed) in enumerate(zip(keys, slot_hashes(keys), strict=True)):
            index = hashed & mask
            while (found := table[index]) and records[found - 1] != key:
                index = (index + 1) & mask
            if found:
                return count
            records.append(key)
            table[index] = len(records)
            self._size += 1
            if self._size * 2 > len(table):
                self._grow()
                table, mask = self._table, self._mask
        return len(keys)

    def found_each(self, keys: Sequence[int]) -> list[int]:
        """:meth:`find`'s record number + 1 of each key (0: none)."""
        table, records, mask = self._table, self.keys, self._mask
        numbers = []
        for key, hashed in zip(keys, slot_hashes(keys), strict=True):
            index = hashed & mask
            while (found := table[index]) and records[found - 1] != key:
                index = (index + 1) & mask
            numbers.append(found)
        return numbers

    def items(self) -> Iterator[tuple[int, int]]:
        """Every key and its current record number."""
        keys = self.keys
        for found in self._table:
            if found:
                yield keys[found - 1], found - 1

    def _grow(self) -> None:
        old, keys = self._table, self.keys
        self._table = table = array("I", bytes(len(old) * 8))
        self._mask = mask = len(table) - 1
        # Read from the old table as it goes: a list of its numbers would be
        # an int object a phone at the peak of a run's memory (row 6n).
        for number in old:
            if number:
                index = hash((keys[number - 1],)) & mask  # slot_hashes' hash of one key
                while table[index]:
                    index = (index + 1) & mask
                table[index] = number
