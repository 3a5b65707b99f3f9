"""Phone numbers: the hint for a country code written without its ``+``,
and a compact set of phones (the only structure of a bulk send that grows
with its input)."""

from __future__ import annotations

import re
from array import array

_SEPARATORS = re.compile(r"[\s\-().]")


def country_code_hint(value: object) -> str:
    """`` (did you mean '+57'?)`` for a country code that is one written
    another way (``57``, the number ``57``, ``0057``, ``+ 57``), else ``""``."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return ""
    digits = _SEPARATORS.sub("", str(value))
    digits = digits[1:] if digits.startswith("+") else digits
    digits = digits[2:] if digits.startswith("00") else digits
    if 1 <= len(digits) <= 4 and digits.isascii() and digits.isdigit() and digits[0] != "0":
        return f" (did you mean '+{digits}'?)"
    return ""


class PhoneSet:
    """Phones seen so far, packed as 64-bit ints in an open-addressing table.

    A phone (``+`` then up to 18 digits, always so after validation) becomes
    ``int("1" + digits)``: exact (the leading 1 keeps leading zeros apart) and
    below 2**63. Longer ones, which validation allows up to 19 digits, go to a
    plain set. 8 bytes a slot at most half full: about 16 bytes a phone.
    """

    __slots__ = ("_count", "_long", "_mask", "_shift", "_slots")
    _GOLDEN = 0x9E3779B97F4A7C15
    _BITS64 = (1 << 64) - 1

    def __init__(self, bits: int = 12) -> None:
        self._slots = array("Q", bytes(8 << bits))
        self._mask = (1 << bits) - 1
        self._shift = 64 - bits
        self._count = 0
        self._long: set[str] = set()

    def __len__(self) -> int:
        return self._count + len(self._long)

    def add(self, phone: str) -> bool:
        """Add ``phone``; False if it was already there."""
        digits = phone[1:]
        if len(digits) > 18 or not digits.isdigit():
            if phone in self._long:
                return False
            self._long.add(phone)
            return True
        key = int("1" + digits)
        slots, mask = self._slots, self._mask
        index = ((key * self._GOLDEN) & self._BITS64) >> self._shift
        while True:
            found = slots[index]
            if found == 0:
                slots[index] = key
                self._count += 1
                if self._count * 2 > len(slots):
                    self._grow()
                return True
            if found == key:
                return False
            index = (index + 1) & mask

    def _grow(self) -> None:
        old = self._slots
        bits = 64 - self._shift + 1
        self._slots = slots = array("Q", bytes(8 << bits))
        self._mask = mask = (1 << bits) - 1
        self._shift = shift = 64 - bits
        golden, bits64 = self._GOLDEN, self._BITS64
        for key in old:
            if key:
                index = ((key * golden) & bits64) >> shift
                while slots[index]:
                    index = (index + 1) & mask
                slots[index] = key
