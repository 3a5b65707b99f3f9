"""Who a person is: one identity per phone line, whatever way its number is
written, and a compact set of those identities.

A number is read once into a :class:`Phone`: its country code, its national
number as the service gets it (no trunk prefix, no repeated country code),
and its ``key``, the identity that dedupe, the ledger, the suppression list,
the daily limit, the sending lines and the matching of outcomes all use.

Reading costs a table look-up for the common number (a length the country
allows and nothing a trunk prefix could be): the table is built per country
code, once, from ``phonenumbers``' metadata. Anything else is handed to
``phonenumbers`` itself, which alone knows trunk prefixes with carrier codes
or Argentina's ``15``.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from typing import Any, Final

import attrs
import phonenumbers
from phonenumbers import PhoneMetadata, ValidationResult
from phonenumbers.phonenumberutil import COUNTRY_CODE_TO_REGION_CODE, UNKNOWN_REGION

from ..errors import ValidationError

_SEPARATORS = re.compile(r"[\s\-().]")
_CELLPHONE_SEPARATORS = re.compile(r"[ \-()]")
_COUNTRY_CODE = re.compile(r"\+0*([1-9][0-9]{0,3})")
_DIGITS = re.compile(r"[0-9]{1,17}")

_WHY: Final[dict[int, str]] = {
    ValidationResult.TOO_SHORT: "is too short",
    ValidationResult.TOO_LONG: "is too long",
    ValidationResult.IS_POSSIBLE_LOCAL_ONLY: "is a local number without its area code",
}


@attrs.frozen(slots=True, eq=False, repr=False)
class Phone:
    """One person's phone line: the identity every rule of campaignkit keys on.

    Two ``Phone`` are equal when they are the same line, however written:
    ``Phone.parse("+44 07700 900123") == Phone.parse("+447700900123")``, and
    WhatsApp's forms of one line (Mexico ``+52 1``, Argentina ``+54 9``,
    Brazil's mobiles with or without the ninth digit) are one ``Phone``.
    ``str(phone)`` is :attr:`key`.
    """

    country_code: str
    """The country code with its ``+`` (``"+57"``), as on the wire."""
    cellphone: str
    """The national number as the service gets it: digits, no trunk prefix."""
    key: str
    """The identity: ``+``, country code and national number in one canonical
    form of the line (``"+573001234567"``)."""

    @classmethod
    def parse(cls, number: str) -> Phone:
        """Read a whole number written as text (``"+57 300 123 4567"``).

        Raises :class:`~campaignkit.ValidationError` naming ``number``.
        """
        return _or_raise("number", read_text(number))

    @classmethod
    def of(cls, country_code: str, cellphone: str) -> Phone:
        """Read a number written as a country code and a cellphone, as a
        :class:`~campaignkit.User` carries it.

        Raises :class:`~campaignkit.ValidationError` naming the field at fault.
        """
        field = (
            "cellphone"
            if isinstance(country_code, str) and country(country_code)
            else "country_code"
        )
        return _or_raise(field, read_phone(country_code, cellphone))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Phone):
            return self.key == other.key
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return self.key

    def __repr__(self) -> str:
        return f"Phone({self.key!r})"


def _or_raise(path: str, read: Phone | str) -> Phone:
    if isinstance(read, str):
        raise ValidationError([(path, read)])
    return read


@attrs.frozen(slots=True)
class _Country:
    """What reading the numbers of one country code takes, from its metadata."""

    code: str
    """``"+57"``."""
    digits: str
    lengths: frozenset[int]
    """The national numbers' lengths the country allows."""
    mobile_lengths: frozenset[int]
    """Its mobile numbers' lengths."""
    is_national: Callable[[str], object]
    """True for a cellphone that is its own national number: ASCII digits, a
    length the country allows, and nothing a trunk prefix (with a carrier
    code) could be at its head; such a number is for ``phonenumbers`` to read."""
    read_as_is: Callable[[str], object]
    """True for a cellphone that reading (:func:`read_phone`) leaves as it
    is: its own national number that cannot be the country code written
    again before a mobile (:func:`_written_again`, which may ask
    ``phonenumbers``). The hot paths' one test of a cellphone."""

    def fast(self, cellphone: str) -> bool:
        """Whether ``cellphone`` is its own national number."""
        return bool(self.is_national(cellphone))


def _is_national(
    lengths: frozenset[int], trunk: str | None, unless: str = ""
) -> Callable[[str], object]:
    """:attr:`_Country.is_national`: one regular expression (one call in C,
    for the hot paths) where the trunk pattern only matches something;
    ``unless``, a pattern the number must not match at its head as well."""
    digits = "|".join(f"[0-9]{{{length}}}" for length in sorted(lengths, reverse=True))
    if not trunk:
        return re.compile(f"{unless}(?:{digits})").fullmatch
    if re.match(trunk, "") is None and not re.search(r"\(\?<?[=!]", trunk):
        return re.compile(f"{unless}(?!{trunk})(?:{digits})").fullmatch
    # A pattern that may match nothing (Argentina's optional 0 and 15).
    whole, head = re.compile(f"{unless}(?:{digits})").fullmatch, re.compile(trunk).match
    return lambda cellphone: whole(cellphone) and not head(cellphone).end()  # type: ignore[union-attr]


def _not_written_again(digits: str, mobile_lengths: frozenset[int]) -> str:
    """A look-ahead refusing the numbers :func:`_written_again` may find
    the country code ``digits`` written again in: those that start with it
    before a mobile's length, and are of no mobile's length whole."""
    again = [n for n in sorted(mobile_lengths) if n + len(digits) not in mobile_lengths]
    if not again:
        return ""
    rest = "|".join(f"[0-9]{{{length}}}" for length in again)
    return f"(?!{digits}(?:{rest})\\Z)"


@cache
def _country(digits: str) -> _Country | None:
    """The country of a country code's ``digits``, or None if none has it."""
    code = int(digits)
    region = COUNTRY_CODE_TO_REGION_CODE.get(code, (UNKNOWN_REGION,))[0]
    if region == UNKNOWN_REGION:
        return None
    if region == "001":
        metadata = PhoneMetadata.metadata_for_nongeo_region(code)
    else:
        metadata = PhoneMetadata.metadata_for_region(region)
    if metadata is None or metadata.general_desc is None:
        return None
    trunk = metadata.national_prefix_for_parsing or metadata.national_prefix
    lengths = frozenset(metadata.general_desc.possible_length)
    mobile = frozenset(metadata.mobile.possible_length if metadata.mobile is not None else ())
    mobile = mobile or lengths
    return _Country(
        "+" + digits,
        digits,
        lengths,
        mobile,
        _is_national(lengths, trunk),
        _is_national(lengths, trunk, _not_written_again(digits, mobile)),
    )


_COUNTRIES: dict[str, _Country | None] = {}
"""Countries by the country code as written (a campaign has few)."""
COUNTRIES_AS_ON_THE_WIRE: dict[str, _Country] = {}
"""The countries read so far by their code as the wire writes it (``+57``),
for hot paths to find in one look-up."""


def country(country_code: str) -> _Country | None:
    """The country of ``country_code`` (``+`` and digits, zeros at the head
    allowed), or None when it is not one."""
    try:
        return _COUNTRIES[country_code]
    except KeyError:
        written = _COUNTRY_CODE.fullmatch(country_code)
        place = None if written is None else _country(written.group(1))
        if len(_COUNTRIES) < 10_000:
            _COUNTRIES[country_code] = place
        if place is not None and place.code == country_code:
            COUNTRIES_AS_ON_THE_WIRE[country_code] = place
        return place


def _national(place: _Country, digits: str) -> str | int:
    """The national number of ``digits`` read in ``place``, or why not (a
    ``phonenumbers.ValidationResult``)."""
    if place.fast(digits):
        return digits
    try:
        number = phonenumbers.parse("+" + place.digits + digits)
    except phonenumbers.NumberParseException:
        return ValidationResult.INVALID_LENGTH
    why = phonenumbers.is_possible_number_with_reason(number)
    if why != ValidationResult.IS_POSSIBLE:
        return why
    return phonenumbers.national_significant_number(number)


def _whatsapp_national(place: _Country, digits: str) -> str:
    """``digits`` without the Mexican mobile ``1`` WhatsApp writes: the
    national number has had none since 2019."""
    if place.digits == "52" and len(digits) == 11 and digits[0] == "1":
        return digits[1:]
    return digits


KEYED_APART: Final = frozenset(("+54", "+55"))
"""The country codes whose key is not the country code and the national
number: elsewhere :func:`identity` is that sum, which hot paths write inline."""


def identity(country_code: str, national: str) -> str:
    """The key of a national number already read (WhatsApp's forms of a line
    made one): Argentina's mobile ``9`` left out, Brazil's ninth digit put in."""
    if country_code == "+54" and len(national) == 11 and national[0] == "9":
        return "+54" + national[1:]
    if country_code == "+55" and len(national) == 10 and national[2] in "6789":
        return "+55" + national[:2] + "9" + national[2:]
    return country_code + national


_MOBILE: Final = frozenset(
    (phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE)
)


def _rank(place: _Country, digits: str) -> int:
    """2 for a mobile number of the country, 1 for another valid one, else 0."""
    try:
        number = phonenumbers.parse("+" + place.digits + _whatsapp_national(place, digits))
    except phonenumbers.NumberParseException:
        return 0
    if not phonenumbers.is_valid_number(number):
        return 0
    return 2 if phonenumbers.number_type(number) in _MOBILE else 1


def _written_again(place: _Country, digits: str) -> bool:
    """Whether ``digits`` (which start with the country code's) is the
    country code written again before a number: only when the rest is a
    number of the country that the whole is not (or a mobile, where the
    whole is a fixed line: campaigns go to mobiles)."""
    rest = digits[len(place.digits) :]
    if place.fast(digits) and (
        len(digits) in place.mobile_lengths or len(rest) not in place.mobile_lengths
    ):
        # A mobile of the country as it is (India's 91…), or no mobile
        # without its head: phonenumbers is not asked.
        return False
    if not isinstance(_national(place, _whatsapp_national(place, rest)), str):
        return False
    return _rank(place, rest) > _rank(place, digits)


NOT_DIGITS: Final = "must be digits (spaces, dashes and parentheses are allowed)"


def cellphone_digits(cellphone: Any) -> str | None:
    """The digits of a cellphone written with spaces, dashes or parentheses,
    or None when it is not one so written."""
    if not isinstance(cellphone, str):
        return None
    digits = cellphone
    if not (digits.isascii() and digits.isdigit()):
        digits = _CELLPHONE_SEPARATORS.sub("", cellphone)
    return digits if digits.isascii() and _DIGITS.fullmatch(digits) else None


def read_phone(country_code: Any, cellphone: Any) -> Phone | str:
    """The :class:`Phone` of a country code and a cellphone, or why there is
    none (a reason about the cellphone, or about the country code when it
    starts with ``"country code"``)."""
    place = country(country_code) if isinstance(country_code, str) else None
    if place is None:
        return f"country code {country_code!r} is no country's"
    digits = cellphone_digits(cellphone)
    if digits is None:
        return NOT_DIGITS
    if digits.startswith(place.digits) and _written_again(place, digits):
        digits = digits[len(place.digits) :]
    elif place.fast(digits):
        return Phone(place.code, digits, identity(place.code, digits))
    national = _national(place, _whatsapp_national(place, digits))
    if isinstance(national, str):
        return Phone(place.code, national, identity(place.code, national))
    lengths = ", ".join(map(str, sorted(place.lengths)))
    return (
        f"{_WHY.get(national, 'has a length no number has')}: {len(digits)} digits, "
        f"where numbers of {place.code} have {lengths} (without the country code)"
    )


def country_code_of(key: str) -> str | None:
    """The country code (``"+57"``) at the head of a phone's key, or None."""
    digits = key[1:]
    for size in (1, 2, 3):
        # Country codes are prefix-free: one length at most names a country.
        if len(digits) > size and _country(digits[:size]) is not None:
            return "+" + digits[:size]
    return None


def read_text(number: Any) -> Phone | str:
    """The :class:`Phone` of a whole number written as text (``"+57 300
    123 4567"``, ``"0057…"``), or why there is none."""
    if not isinstance(number, str):
        return "must be a phone number as text"
    digits = _SEPARATORS.sub("", number)
    digits = "+" + digits[2:] if digits.startswith("00") else digits
    if not (digits[:1] == "+" and digits[1:].isascii() and digits[1:].isdigit()):
        return (
            "must be a phone number with its country code: '+' and digits "
            "(e.g. '+573001234567'; spaces, dashes and parentheses are allowed)"
        )
    digits = "+" + digits[1:].lstrip("0")
    code = country_code_of(digits)
    if code is None:
        return "starts with no country code"
    return read_phone(code, digits[len(code) :])


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


def int_keys(phones: Sequence[str]) -> list[int] | None:
    """Each phone as a 64-bit int, ``int("1" + phone[1:])`` (the leading 1
    keeps leading zeros apart), worked out a column at a time; None unless
    every phone is its ``+`` and 1 to 18 ASCII digits after it."""
    digits = [phone[1:] for phone in phones]
    joined = "".join(digits)
    if not (joined.isascii() and joined.isdigit()):
        return None
    keys = [*map(int, map("1".__add__, digits))]
    # Below 10: "1" alone, a phone without digits; from 10**19: more than 18 digits.
    return keys if min(keys) >= 10 and max(keys) < 10**19 else None


def slot_hashes(keys: Iterable[int]) -> Iterator[int]:
    """The hashes that place int keys in an open-addressing table (their low
    bits): each key's 1-tuple's, which CPython mixes in C (a round of
    xxHash), at half the cost of a multiplicative hash in Python's ints."""
    return map(hash, zip(keys))


class PhoneSet:
    """Phone keys seen so far, packed as 64-bit ints in an open-addressing table.

    A key (``+`` then up to 18 digits, always so for a :class:`Phone`)
    becomes its :func:`int_keys` int: exact and below 2**63. Anything longer
    goes to a plain set. 8 bytes a slot at most half full: about 16 bytes a
    phone.
    """

    __slots__ = ("_count", "_long", "_mask", "_slots")

    def __init__(self, bits: int = 12) -> None:
        self._slots = array("Q", bytes(8 << bits))
        self._mask = (1 << bits) - 1
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
        return self._add_keys([int("1" + digits)])[0]

    def add_each(self, phones: Sequence[str]) -> list[bool]:
        """:meth:`add` of each phone in turn, at once: what each returned (a
        bulk send's planner files a batch of users so: one loop over keys
        worked out a column at a time)."""
        keys = int_keys(phones)
        return [*map(self.add, phones)] if keys is None else self._add_keys(keys)

    def _add_keys(self, keys: list[int]) -> list[bool]:
        added: list[bool] = []
        slots, mask = self._slots, self._mask
        for key, hashed in zip(keys, slot_hashes(keys), strict=True):
            index = hashed & mask
            while (found := slots[index]) and found != key:
                index = (index + 1) & mask
            if found:
                added.append(False)
                continue
            slots[index] = key
            self._count += 1
            added.append(True)
            if self._count * 2 > len(slots):
                self._grow()
                slots, mask = self._slots, self._mask
        return added

    def _grow(self) -> None:
        old = self._slots
        self._slots = slots = array("Q", bytes(len(old) * 16))
        self._mask = mask = len(slots) - 1
        # Read from the old table as it goes: a list of its keys would be an
        # int object a phone at the peak of a send's memory.
        for key in old:
            if key:
                index = hash((key,)) & mask  # slot_hashes' hash of one key
                while slots[index]:
                    index = (index + 1) & mask
                slots[index] = key
