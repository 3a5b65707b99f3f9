"""The wording rules every text a person reads shares: a count with its noun
in the right number (``1 user``, ``2 users``), and a name with its article
(``an InvalidInput``, ``a User``)."""

from __future__ import annotations

__all__ = ["article", "counted", "listed"]

# Capitals whose letter name starts with a vowel sound: "an HTTPError".
_VOWEL_LETTER_NAMES = frozenset("AEFHILMNORSX")


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, plural unless one: ``1 launch``, ``3 launches``
    (``plural`` for the irregular ones)."""
    return f"{count} {noun if count == 1 else _plural(noun, plural)}"


def listed(noun: str, names: list[str], plural: str | None = None) -> str:
    """``noun`` in the number of ``names``, then the names: ``field: email``,
    ``fields: email, phone``."""
    return f"{noun if len(names) == 1 else _plural(noun, plural)}: {', '.join(names)}"


def _plural(noun: str, plural: str | None) -> str:
    if plural is not None:
        return plural
    return noun + ("es" if noun.endswith(("s", "sh", "ch", "x", "z")) else "s")


def article(word: str) -> str:
    """``a`` or ``an`` for ``word`` (a type's name, as it is read aloud)."""
    if len(word) > 1 and word[:2].isupper():  # an acronym, read letter by letter
        return "an" if word[0] in _VOWEL_LETTER_NAMES else "a"
    first, rest = word[:1].lower(), word[1:3].lower()
    if first == "u":
        # "a User", "a Union", "a UUID" read "you"; "an unknown" does not.
        reads_you = rest[:1] == "u" or (
            len(rest) == 2 and rest[0] not in "aeiou" and rest[1] in "aeiou"
        )
        return "a" if reads_you else "an"
    return "an" if first in ("a", "e", "i", "o") else "a"
