"""The guards that stop a run burning its sending line, as pure judgements:
a :class:`Canary` (the first recipients, followed, judge the rest) and a
:class:`Breaker` (the failure share of the last settled recipients), and
which template statuses pause every run (:func:`template_pauses`). The
ledger and the pipeline apply them; nothing here reads or sends."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Final

import attrs

from ._input.validation import Problems, raise_problems

PAUSING_TEMPLATE_STATUSES: Final = frozenset({"PAUSED", "DISABLED"})
"""A template in one of these statuses is refused by the network: every
running run of the ledger pauses when its webhook says so."""


class Verdict(enum.StrEnum):
    """What a guard says of a run."""

    GO = "go"
    """Send on."""
    WAIT = "wait"
    """Not known yet: ask again once more recipients have settled."""
    PAUSE = "pause"
    """Pause the run: its figures (the judgement's detail) say why."""


@attrs.frozen
class Judgement:
    """A guard's :class:`Verdict`, and its figures in words (each share
    named with its base: ``"12% of 500 settled recipients failed"``)."""

    verdict: Verdict
    detail: str


def _share(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage, to one decimal where it matters."""
    percent = 100.0 * part / whole if whole else 0.0
    return f"{percent:.0f}%" if percent == int(percent) else f"{percent:.1f}%"


def _fraction_problems(name: str, value: object) -> Problems:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        return [(name, f"must be a share from 0 to 1 (e.g. 0.05 for 5%), got {value!r}")]
    return []


def _count_problems(name: str, value: object) -> Problems:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return [(name, f"must be an int >= 1 (recipients), got {value!r}")]
    return []


def _counts(**counts: int) -> None:
    """Refuse a negative or non-int figure (a caller's bug, not a user's)."""
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class Canary:
    """Send the first ``size`` recipients of a run, follow them until they
    have settled or ``wait`` has passed, and send the rest only if at least
    ``min_delivered`` of them were delivered and at most ``max_failed``
    failed (shares of the canary's accepted recipients); otherwise the run
    is paused with the figures that failed (``send_bulk(canary=...)``; see
    :mod:`campaignkit.bulk`)."""

    size: int = 200
    wait: timedelta = timedelta(minutes=15)
    min_delivered: float = 0.8
    max_failed: float = 0.05

    def __attrs_post_init__(self) -> None:
        problems = _count_problems("size", self.size)
        wait = self.wait
        if not isinstance(wait, timedelta) or wait <= timedelta(0):
            problems.append(("wait", f"must be a timedelta > 0 (e.g. 15 minutes), got {wait!r}"))
        problems += _fraction_problems("min_delivered", self.min_delivered)
        problems += _fraction_problems("max_failed", self.max_failed)
        raise_problems(problems)

    def judge(self, accepted: int, delivered: int, failed: int, *, waited: timedelta) -> Judgement:
        """The verdict on a canary whose ``accepted`` recipients counted
        ``delivered`` and ``failed`` so far, ``waited`` after they were sent.

        It pauses as soon as the failures pass ``max_failed`` (they never
        go down), goes on as soon as the shares hold whatever becomes of
        the recipients not settled yet, waits otherwise, and once ``wait``
        has passed judges the delivered share as it stands.
        """
        _counts(accepted=accepted, delivered=delivered, failed=failed)
        if accepted == 0:
            return Judgement(Verdict.GO, "no canary recipient was accepted: nothing to judge")
        base = f"of {accepted} canary recipients"
        failed_words = f"{_share(failed, accepted)} {base} failed ({failed})"
        delivered_words = f"{_share(delivered, accepted)} {base} were delivered ({delivered})"
        if failed > self.max_failed * accepted:
            return Judgement(
                Verdict.PAUSE, f"{failed_words}: over the canary's max_failed of {self.max_failed}"
            )
        open_ = max(0, accepted - delivered - failed)
        holds = delivered >= self.min_delivered * accepted
        if holds and failed + open_ <= self.max_failed * accepted:
            return Judgement(Verdict.GO, f"{delivered_words}; {failed_words}")
        if open_ and waited < self.wait:
            return Judgement(
                Verdict.WAIT, f"{delivered_words} so far; {open_} not settled yet; {failed_words}"
            )
        if not holds:
            return Judgement(
                Verdict.PAUSE,
                f"{delivered_words} within {_minutes(self.wait)}: under the canary's "
                f"min_delivered of {self.min_delivered}; {failed_words}",
            )
        return Judgement(Verdict.GO, f"{delivered_words}; {failed_words}")


def _minutes(wait: timedelta) -> str:
    seconds = wait.total_seconds()
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


@attrs.frozen(kw_only=True)
class Breaker:
    """Pause a run when more than ``max_failed`` (a share) of its last
    ``over`` settled recipients failed. Before ``over`` have settled, the
    share is of ``over`` all the same: a run whose failures already pass it
    pauses at once, one that has few settled recipients is not judged on them."""

    max_failed: float = 0.2
    over: int = 500

    def __attrs_post_init__(self) -> None:
        problems = _fraction_problems("max_failed", self.max_failed)
        problems += _count_problems("over", self.over)
        raise_problems(problems)

    def judge(self, settled: int, failed: int) -> Judgement:
        """The verdict on a run whose last ``settled`` settled recipients (at
        most ``over``) counted ``failed`` failures."""
        _counts(settled=settled, failed=failed)
        if failed > settled:
            raise ValueError(f"failed ({failed}) cannot exceed settled ({settled})")
        base = max(settled, self.over)
        if settled >= self.over:
            words = f"{_share(failed, settled)} of {settled} settled recipients failed ({failed})"
        else:  # judged over ``over`` all the same: the rest may yet fail
            words = (
                f"{failed} of {settled} settled recipients failed "
                f"({_share(failed, base)} of the {base} the breaker judges)"
            )
        if failed > self.max_failed * base:
            return Judgement(
                Verdict.PAUSE, f"{words}: over the breaker's max_failed of {self.max_failed}"
            )
        return Judgement(Verdict.GO, words)


def template_pauses(status: str | None) -> bool:
    """Whether a template in ``status`` (as its webhook event sends it)
    pauses every running run: ``PAUSED`` or ``DISABLED``."""
    return isinstance(status, str) and status.strip().upper() in PAUSING_TEMPLATE_STATUSES


def guard_options(
    breaker: Breaker | None,
    cooldown: timedelta | None,
    skip_open_conversations: bool,
    canary: Canary | None = None,
) -> dict[str, Any]:
    """The guards a ledger applies itself (at claim, and where outcomes are
    recorded), as plain JSON kept with the run's options: every worker of
    the run applies them; and the run's canary, which its send applies
    (kept for whoever shows the run)."""
    return {
        "breaker": None
        if breaker is None
        else {"max_failed": breaker.max_failed, "over": breaker.over},
        "cooldown": None if cooldown is None else cooldown.total_seconds(),
        "skip_open_conversations": skip_open_conversations,
        "canary": None
        if canary is None
        else {
            "size": canary.size,
            "wait": canary.wait.total_seconds(),
            "min_delivered": canary.min_delivered,
            "max_failed": canary.max_failed,
        },
    }


def breaker_of(options: Mapping[str, Any]) -> Breaker | None:
    """The run's breaker, from its options (see :func:`guard_options`)."""
    kept = options.get("breaker")
    return None if not isinstance(kept, Mapping) else Breaker(**kept)


def cooldown_of(options: Mapping[str, Any]) -> float | None:
    """The run's cool-down in seconds, from its options."""
    kept = options.get("cooldown")
    return float(kept) if isinstance(kept, int | float) and not isinstance(kept, bool) else None


def skips_open_conversations(options: Mapping[str, Any]) -> bool:
    return options.get("skip_open_conversations") is True


def guard_words(options: Mapping[str, Any]) -> list[str]:
    """The guards a run keeps in its options, each as the command line
    gives it (``cooldown 24h``, ``breaker 0.2/500``, ``canary 200 ...``)."""
    words = []
    if (cooldown := cooldown_of(options)) is not None:
        words.append(f"cooldown {_duration(cooldown)}")
    if skips_open_conversations(options):
        words.append("skip open conversations")
    if (breaker := breaker_of(options)) is not None:
        words.append(f"breaker {breaker.max_failed:g}/{breaker.over}")
    if isinstance(canary := options.get("canary"), Mapping):
        words.append(
            f"canary {canary['size']} (wait {_duration(canary['wait'])}, min delivered "
            f"{canary['min_delivered']:g}, max failed {canary['max_failed']:g})"
        )
    return words


def _duration(seconds: float) -> str:
    """``seconds`` in the units the command line reads (``1d2h``, ``90s``)."""
    left, parts = round(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or f"{seconds:g}s"


def guard_problems(
    breaker: object,
    cooldown: object,
    skip_open_conversations: object,
    max_recipients: object,
    canary: object = None,
) -> Problems:
    """Every problem of a bulk send's guard options, each naming its field."""
    problems: Problems = []
    if canary is not None and not isinstance(canary, Canary):
        problems.append(
            (
                "canary",
                "must be a Canary(size=, wait=, min_delivered=, max_failed=) or None, "
                f"got {canary!r}",
            )
        )
    if breaker is not None and not isinstance(breaker, Breaker):
        problems.append(
            ("breaker", f"must be a Breaker(max_failed=, over=) or None, got {breaker!r}")
        )
    if cooldown is not None and (not isinstance(cooldown, timedelta) or cooldown <= timedelta(0)):
        problems.append(
            (
                "cooldown",
                f"must be a timedelta > 0 (e.g. timedelta(hours=24)) or None, got {cooldown!r}",
            )
        )
    if not isinstance(skip_open_conversations, bool):
        problems.append(
            ("skip_open_conversations", f"must be True or False, got {skip_open_conversations!r}")
        )
    if max_recipients is not None:
        problems += _count_problems("max_recipients", max_recipients)
    return problems
