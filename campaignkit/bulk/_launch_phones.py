"""Which recipient of a launch a deployment of its status is: the service
names a deployment's user by the cellphone, not by the number the ledger
files (country code and cellphone)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Final, cast

_ENDINGS: Final[tuple[Callable[[str], str], ...]] = tuple(
    itemgetter(slice(start, None)) for start in range(1, 6)
)
"""A recipient's number without its first 1 to 5 characters (``+`` and a
country code of 0 to 4 digits): the cellphones a deployment may name it by."""


def _by_ending(
    phones: Sequence[str], endings: Iterable[Callable[[str], str]]
) -> dict[str | None, str]:
    """``phones`` by their ``endings``; ``""`` for an ending of two of them."""
    # Built in C (benchmarks row 15: a dict is made for every launch
    # followed). When no ending repeats, the dict holds every one of them.
    by_ending: dict[str | None, str] = {}
    endings = tuple(endings)
    for ending in endings:
        by_ending.update(zip(map(ending, phones), phones, strict=True))
    if len(by_ending) < len(endings) * len(phones):  # rare: some ending repeats
        owners: dict[str, set[str]] = {}
        for phone in phones:
            for ending in endings:
                owners.setdefault(ending(phone), set()).add(phone)
        by_ending.update((ending, "") for ending, who in owners.items() if len(who) > 1)
    return by_ending


class LaunchPhones:
    """The recipients of one launch, found by a deployment's ``cellphone``.

    A deployment names its user by the cellphone, without the country code
    (or with it): the recipient whose phone (``+``, a country code of 1 to 4
    digits, the cellphone) ends with those digits. A number two recipients
    of the launch could have is nobody's (not guessed).
    """

    __slots__ = ("_by_ending", "_length", "_phones")

    def __init__(self, phones: Iterable[str]) -> None:
        self._phones = list(phones)
        lengths = set(map(len, self._phones))
        self._length = lengths.pop() if len(lengths) == 1 else None
        """The length of every recipient's number, when they share one."""
        self._by_ending: dict[int, dict[str | None, str]] = {}
        """Built when first needed: by the characters an ending leaves out
        (1 to 5), or 0 for every ending."""

    def phone_of(self, cellphone: str | None) -> str | None:
        """The recipient a deployment's ``cellphone`` names, or None."""
        return self.phones_of([cellphone])[0]

    def phones_of(self, cellphones: Iterable[str | None]) -> list[str | None]:
        """:meth:`phone_of` of each of ``cellphones``, the usual case (each a
        cellphone as the recipient's number ends) found in C."""
        cellphones = list(cellphones)
        found: list[str | None] = list(map(self._endings(cellphones).get, cellphones))
        if None in found or "" in found:
            for index, phone in enumerate(found):
                if not phone:
                    found[index] = self._slow(cellphones[index], phone)
        return found

    def _endings(self, cellphones: list[str | None]) -> dict[str | None, str]:
        """A dict that finds ``cellphones``: when every number and every
        cellphone has one length (the usual case), a cellphone can end one
        number one way only, so the endings of that one way are enough."""
        skip = 0
        if self._length is not None and None not in cellphones:
            lengths = set(map(len, cast("list[str]", cellphones)))
            if len(lengths) == 1 and 1 <= self._length - min(lengths) <= len(_ENDINGS):
                skip = self._length - min(lengths)
        by_ending = self._by_ending.get(skip)
        if by_ending is None:
            endings = _ENDINGS[skip - 1 : skip] if skip else _ENDINGS
            by_ending = self._by_ending[skip] = _by_ending(self._phones, endings)
        return by_ending

    def _slow(self, cellphone: str | None, found: str | None) -> str | None:
        if found is not None or cellphone is None:
            return None  # "" is two recipients' ending: nobody's
        # Spaces, dashes or a "+" around the digits: the digits are the number.
        digits = "".join(char for char in cellphone if char.isdigit())
        if digits == cellphone:
            return None
        return self._endings([digits]).get(digits) or None
