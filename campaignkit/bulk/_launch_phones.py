"""Which recipient of a launch a deployment of its status is: the service
names a deployment's user by the cellphone, not by the number the ledger
files (country code and cellphone)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

_TAIL: Final = 7
"""Digits a recipient is filed under: the last seven."""


class LaunchPhones:
    """The recipients of one launch, found by a deployment's ``cellphone``.

    A deployment names its user by the cellphone, without the country code
    (or with it): the recipient whose phone (``+``, a country code of 1 to 4
    digits, the cellphone) ends with those digits. A number two recipients
    of the launch could have is nobody's (not guessed).
    """

    __slots__ = ("_by_tail", "_phones")

    def __init__(self, phones: Iterable[str]) -> None:
        self._phones = list(phones)
        by_tail: dict[str, str | list[str]] = {}
        for phone in self._phones:
            tail = phone[1:][-_TAIL:]
            found = by_tail.setdefault(tail, phone)
            if found != phone:  # rare: kept apart, told apart by the whole number
                by_tail[tail] = [*([found] if isinstance(found, str) else found), phone]
        self._by_tail = by_tail

    def phone_of(self, cellphone: str) -> str | None:
        found = self._by_tail.get(cellphone[-_TAIL:])
        if type(found) is str and len(cellphone) >= _TAIL and found.endswith(cellphone):
            # The usual case: the only recipient whose number ends so.
            return found if 1 <= len(found) - len(cellphone) <= 5 else None
        digits = "".join(char for char in cellphone if char.isdigit())
        if len(digits) < _TAIL:  # a short number: any recipient's may end with it
            candidates: Iterable[str] = self._phones
        else:
            found = self._by_tail.get(digits[-_TAIL:])
            candidates = () if found is None else [found] if isinstance(found, str) else found
        matches = [
            phone
            for phone in candidates
            if phone.endswith(digits) and 1 <= len(phone) - len(digits) <= 5
        ]
        return matches[0] if len(matches) == 1 else None
