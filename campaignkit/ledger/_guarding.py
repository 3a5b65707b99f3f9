"""The guards a ledger keeps itself (see :mod:`campaignkit._guards`), as
steps of its transactions over a :class:`~._store.StoreTx`: the cool-down,
open conversations and the daily limit at claim, the breaker where
failures are recorded, and what a paused run's pause says."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from .._guards import Verdict, breaker_of, cooldown_of, skips_open_conversations
from .._input.validation import Problems
from .._redaction import sdk_logger
from .._report import COOLDOWN, OPEN_CONVERSATION, deferral_detail
from ..status import DeploymentStatus
from ._records import DEFERRED, PLANNED
from ._sending import DAY, daily_limit_of, deferred_detail, over_budget
from ._store import StoreTx, Where

if TYPE_CHECKING:
    from ..webhooks import WebhookEvent

log = sdk_logger("campaignkit.ledger")

MANUAL_PAUSE: Final = "manual"
"""The reason of a pause made by hand (``ledger.pause_run(run)``)."""
TEMPLATE: Final = "template"
"""The reason of the pauses a paused or disabled template makes (its webhook)."""
BREAKER: Final = "breaker"
CANARY: Final = "canary"

FINAL: Final = tuple(s.value for s in DeploymentStatus if s.is_final)
FAILED: Final = frozenset(s.value for s in DeploymentStatus if s.is_failure)


async def defer_contacted(
    tx: StoreTx,
    run: str,
    chunk: str,
    now: float,
    options: Mapping[str, Any],
    counted: Collection[str],
) -> None:
    """File deferred the planned recipients of ``chunk`` that the run's
    cool-down or open conversations keep back: messaged by a run of the
    ledger within the cool-down (held in a ``counted`` state, no reply
    since), or who answered in the last 24 h."""
    cooldown, skip_open = cooldown_of(options), skips_open_conversations(options)
    if skip_open:
        answered = await tx.answered_in(run, chunk, PLANNED, now - DAY)
        detail = deferral_detail(
            OPEN_CONVERSATION,
            "answered within the last 24 h: their conversation is open; a rerun sends "
            "it once it has closed",
        )
        await _defer(tx, run, chunk, answered, detail, now)
    if cooldown is not None:
        contacted = await tx.contacted_in(run, chunk, PLANNED, now - cooldown, counted)
        detail = deferral_detail(
            COOLDOWN,
            f"messaged by a run of this ledger within the cool-down of {cooldown / 3600:g} h "
            "and no reply since; a rerun sends it once the cool-down has passed",
        )
        await _defer(tx, run, chunk, contacted, detail, now)


async def defer_over_budget(
    tx: StoreTx,
    run: str,
    chunk: str,
    now: float,
    options: Mapping[str, Any],
    counted: Collection[str],
) -> None:
    """File deferred the planned recipients of ``chunk`` past the run's
    daily limit (one of its ``options``; the people held in a ``counted``
    state by claims of the last 24 h use it), so that the claim leaves them."""
    limit = daily_limit_of(options)
    if limit is None:
        return
    await tx.lock("daily_limit")
    since = now - DAY
    phones = await tx.phones_in(run, chunk, PLANNED)
    used, oldest = await tx.budget_used(since, counted)
    if len(phones) <= limit - used:
        return
    already = await tx.counted_among(since, counted, phones)
    deferred = over_budget(phones, already, used, limit)
    detail = deferred_detail(limit, None if oldest is None else oldest + DAY)
    await _defer(tx, run, chunk, deferred, detail, now)


async def _defer(
    tx: StoreTx, run: str, chunk: str, phones: Sequence[str], detail: str, now: float
) -> None:
    if phones:
        where = Where((PLANNED,), chunk=chunk, phones=phones)
        await tx.move(run, where, DEFERRED, now, {"detail": detail})


async def judge_breaker(tx: StoreTx, run: str, options: Mapping[str, Any]) -> None:
    """Pause the run if its breaker (an option kept with it) judges that
    too many of its last settled recipients failed. Run where failures are
    recorded, in their transaction: whichever worker records them."""
    breaker = breaker_of(options)
    if breaker is None or await is_paused(tx, run):
        return
    settled = failed = 0
    for _, count, failures in await tx.settled_recent(run, breaker.over, FINAL, FAILED):
        taken = min(count, breaker.over - settled)
        # A group past the window's edge counts its failures pro rata.
        settled, failed = settled + taken, failed + failures * taken // count
        if settled == breaker.over:
            break
    judgement = breaker.judge(settled, failed)
    if judgement.verdict is Verdict.PAUSE:
        await tx.pause_run(run, BREAKER, judgement.detail, time.time())
        log.warning("run %s: paused (%s): %s", run, BREAKER, judgement.detail)


async def is_paused(tx: StoreTx, run: str) -> bool:
    """Whether the run is paused: its claims take nothing."""
    found = await tx.run(run)
    return found is not None and found[0].paused is not None


async def pause_running(
    tx: StoreTx, reason: str, detail: str, states: Collection[str]
) -> list[str]:
    """Pause every running run (see :meth:`StoreTx.running_runs`); those paused."""
    paused = [
        run
        for run in await tx.running_runs(states)
        if await tx.pause_run(run, reason, detail, time.time())
    ]
    for run in paused:
        log.warning("run %s: paused (%s): %s", run, reason, detail)
    return paused


def template_detail(event: WebhookEvent) -> str:
    """Why a template status event pauses every run."""
    template = event.template
    assert template is not None
    when = event.occurred_at or datetime.now(UTC)
    return (
        f"template {template.name or '(unnamed)'} is {template.status} "
        f"(its webhook at {when:%Y-%m-%d %H:%M} UTC)"
    )


def pause_problems(reason: object, detail: object) -> Problems:
    problems: Problems = []
    if not isinstance(reason, str) or not reason.strip():
        problems.append(("reason", f"must be a non-empty string, got {reason!r}"))
    if not isinstance(detail, str):
        problems.append(("detail", f"must be a string, got {detail!r}"))
    return problems
