"""Which recipient of a launch a deployment of its status is: the service
names a deployment's user by the cellphone, not by the person the ledger
files (a :class:`~campaignkit.Phone`'s key)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import filterfalse
from operator import methodcaller
from typing import cast

from .._input.phones import country_code_of, read_phone


class LaunchPhones:
    """The recipients of one launch, found by a deployment's ``cellphone``.

    A deployment names its user by a cellphone, as it was sent, in another
    of the line's forms (WhatsApp's ``+52 1``), or with the country code: the
    recipient is the one whose identity that cellphone reads as under one of
    the launch's country codes. A cellphone two recipients could be (under
    two country codes) is nobody's: not guessed, and never matched by how
    the numbers end.
    """

    __slots__ = ("_codes", "_keys")

    def __init__(self, phones: Iterable[str]) -> None:
        self._keys = {phone: phone for phone in phones}
        self._codes = _country_codes(list(self._keys))

    def phone_of(self, cellphone: str | None) -> str | None:
        """The recipient a deployment's ``cellphone`` names, or None."""
        return self.phones_of([cellphone])[0]

    def phones_of(self, cellphones: Iterable[str | None]) -> list[str | None]:
        """:meth:`phone_of` of each of ``cellphones``; the usual case (each
        the national number sent, under the launch's one country code) in C."""
        cellphones = list(cellphones)
        if len(self._codes) == 1 and None not in cellphones:
            written = map(self._codes[0].__add__, cast("list[str]", cellphones))
            found: list[str | None] = list(map(self._keys.get, written))
        else:
            found = [None] * len(cellphones)
        if None in found:
            for index, phone in enumerate(found):
                if phone is None:
                    found[index] = self._read(cellphones[index])
        return found

    def _read(self, cellphone: str | None) -> str | None:
        if cellphone is None:
            return None
        digits = "".join(char for char in cellphone if char.isdigit())
        people = set()
        for code in self._codes:
            phone = read_phone(code, digits)
            if not isinstance(phone, str) and phone.key in self._keys:
                people.add(phone.key)
        return people.pop() if len(people) == 1 else None


def _country_codes(keys: list[str]) -> list[str]:
    """The country codes of phones' ``keys``, read once per country: no
    country code is the head of another, so a key that starts with one has
    it (benchmarks row 15: a launch's thousand recipients share one)."""
    codes: set[str] = set()
    while keys:
        code = country_code_of(keys[0])
        if code is None:
            keys = keys[1:]
            continue
        codes.add(code)
        keys = list(filterfalse(methodcaller("startswith", code), keys))
    return sorted(codes)
