"""The suppression list a ledger keeps across its runs: numbers no run sends
to (unless told to ignore the list for one run), each with the reason it is
there (:class:`~campaignkit.ledger.Ledger` keeps it): an entry, the reasons
added automatically, and the one mapping from what the service says to a
reason."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

import attrs

from .._input.validation import Problems, is_text, ledger_phone, raise_problems
from ..status import DeploymentStatus
from ._outcomes import StatusRow

if TYPE_CHECKING:
    from ..webhooks import EventKind

MANUAL: Final = "manual"
"""The reason of numbers added without one."""
OPT_OUT: Final = "opt_out"
"""The reason of numbers whose owner opted out in a webhook event
(:attr:`campaignkit.webhooks.EventKind.OPT_OUT`)."""
SUPPRESSING_STATUSES: Final = frozenset(
    {
        DeploymentStatus.FAILURE_BY_OPTOUT_CONTACT,
        DeploymentStatus.FAILURE_BY_BLOCKED_CONTACT,
        DeploymentStatus.INVALID_PHONE,
    }
)
"""The deployment statuses that put a number on the list (the status is the reason)."""
MAX_TEXT_LENGTH: Final = 500
"""The longest ``reason`` or ``source`` an entry takes."""


_SUPPRESSING_VALUES: Final = frozenset(status.value for status in SUPPRESSING_STATUSES)
_STATUS: Final = itemgetter(3)


def listed_by_outcome(rows: Sequence[StatusRow]) -> dict[str, list[str]]:
    """The numbers that statuses tracking saw put on the list, by reason:
    what recording a run's outcomes adds."""
    # Most groups of rows list no one: their statuses, gathered in C, tell.
    if _SUPPRESSING_VALUES.isdisjoint(map(_STATUS, rows)):
        return {}
    listed: dict[str, list[str]] = {}
    for phone, _, _, status, _ in rows:
        if status in _SUPPRESSING_VALUES:
            listed.setdefault(status, []).append(phone)
    return listed


@attrs.frozen
class Suppression:
    """A number on the suppression list: ``phone`` (the person's
    :class:`~campaignkit.Phone` key, as the ledger keys recipients), why it is there, what put it
    there (a run, a file; None if nothing was said) and when (UNIX seconds)."""

    phone: str
    reason: str
    source: str | None
    added: float


def suppression_reason(what: DeploymentStatus | EventKind) -> str | None:
    """The reason ``what`` puts a number on the suppression list, or None if it
    does not: a deployment that ended ``FAILURE_BY_OPTOUT_CONTACT``,
    ``FAILURE_BY_BLOCKED_CONTACT`` or ``INVALID_PHONE`` (the status's name),
    or an opt-out webhook event (:data:`OPT_OUT`)."""
    if isinstance(what, DeploymentStatus):
        return what.value if what in SUPPRESSING_STATUSES else None
    # Imported here: the webhooks (aiohttp's server side) may import the ledger.
    from ..webhooks import EventKind

    return OPT_OUT if what is EventKind.OPT_OUT else None


def entry_problems(reason: Any, source: Any) -> Problems:
    """What is wrong with an entry's ``reason`` and ``source`` (None allowed)."""
    problems: Problems = []
    given = [("reason", reason)] + ([] if source is None else [("source", source)])
    for name, value in given:
        if not is_text(value) or not value.strip():
            problems.append((name, "must be non-empty text (a str)"))
        elif len(value) > MAX_TEXT_LENGTH:
            too_long = f"must be at most {MAX_TEXT_LENGTH} characters, got {len(value)}"
            problems.append((name, too_long))
    return problems


def suppression_phones(phones: Iterable[Any]) -> list[str]:
    """``phones`` as the ledger keys them, each once, in order; a
    :class:`~campaignkit.errors.ValidationError` naming every bad one."""
    if isinstance(phones, str):
        phones = [phones]  # one number, not its characters
    problems: Problems = []
    found = [ledger_phone(value, f"phones[{i}]", problems) for i, value in enumerate(phones)]
    raise_problems(problems)
    return list(dict.fromkeys(phone for phone in found if phone is not None))
