"""The suppression list a ledger keeps across its runs: numbers no run sends
to (unless told to ignore the list for one run), each with the reason it is
there. What every ledger offers (:class:`SuppressionList`, a part of
:class:`~campaignkit.ledger.Ledger`), the reasons added automatically, and
the one mapping from what the service says to a reason."""

from __future__ import annotations

import abc
import time
from collections.abc import AsyncIterator, Iterable, Sequence
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


class SuppressionList(abc.ABC):
    """The suppression list of a ledger (see :mod:`campaignkit.ledger`).

    Numbers are given as text with their country code (``"+57 300 123 4567"``)
    or as users (a :class:`~campaignkit.User` or its dict), and kept as the
    ledger keys recipients (``"+573001234567"``). A bad one raises
    :class:`~campaignkit.errors.ValidationError`, naming it, before anything
    is changed.
    """

    async def suppress(
        self, phones: Iterable[Any], reason: str = MANUAL, *, source: str | None = None
    ) -> int:
        """Put ``phones`` on the list with ``reason`` (and ``source``, what put
        them there); how many were new to it. A number already on the list
        keeps its entry (remove it first to change its reason)."""
        raise_problems(entry_problems(reason, source))
        return await self._add_suppressions(suppression_phones(phones), reason, source, time.time())

    async def unsuppress(self, phones: Iterable[Any]) -> int:
        """Take ``phones`` off the list; how many were on it."""
        return await self._remove_suppressions(suppression_phones(phones))

    async def suppressed(self, phones: Iterable[Any]) -> dict[str, Suppression]:
        """The entries of those of ``phones`` that are on the list, by phone."""
        return await self._find_suppressions(suppression_phones(phones))

    async def suppression(self, phone: Any) -> Suppression | None:
        """The entry of ``phone`` if it is on the list, else None."""
        return next(iter((await self.suppressed([phone])).values()), None)

    @abc.abstractmethod
    def suppressions(self, *, page_size: int = 10_000) -> AsyncIterator[Suppression]:
        """Every number on the list, in phone order (read page by page)."""

    @abc.abstractmethod
    async def _add_suppressions(
        self, phones: Sequence[str], reason: str, source: str | None, added: float
    ) -> int: ...

    @abc.abstractmethod
    async def _remove_suppressions(self, phones: Sequence[str]) -> int: ...

    @abc.abstractmethod
    async def _find_suppressions(self, phones: Sequence[str]) -> dict[str, Suppression]: ...
