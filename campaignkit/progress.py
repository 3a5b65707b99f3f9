"""``ProgressUpdate``: throttled snapshots of a campaign's (or a bulk run's)
progress, for a chat message or a dashboard, with an ETA from the observed
rate. Shared by ``CampaignTracker.updates()``, ``TrackerGroup.updates()`` and
``BulkWorkers.updates()``; the snapshot, the ETA and the throttle are pure but
for the injected clock and sleep."""

from __future__ import annotations

import contextlib
import math
import warnings
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from ._funnel import Funnel
from .errors import ValidationError
from .ledger import ACCEPTED, AMBIGUOUS, IN_FLIGHT, PLANNED, REJECTED
from .status import KNOWN_WIRE_STATUSES, CampaignState, DeploymentStatus, Stage, stage_of

TOP_FAILURES = 5
ETA_WINDOW = 60.0
"""Seconds of observations the rate (and so the ETA) is measured over."""


class StageCounts(Mapping[Stage, int]):
    """People per :class:`Stage`, every stage (0 for those with nobody).

    A key that is not a stage (a status, a ledger state: what ``counts`` held
    before) is deprecated: it reads the update's ``statuses`` or ``states``,
    with a ``DeprecationWarning``.
    """

    __slots__ = ("_by_stage", "_former")

    def __init__(self, by_stage: Mapping[Stage, int], former: Mapping[Any, int]) -> None:
        self._by_stage = {stage: by_stage.get(stage, 0) for stage in Stage}
        self._former = former

    def __getitem__(self, key: object) -> int:
        try:
            return self._by_stage[key]  # type: ignore[index]
        except KeyError:
            pass
        warnings.warn(
            "ProgressUpdate.counts is keyed by Stage: read deployment statuses from "
            "ProgressUpdate.statuses, a run's ledger states from ProgressUpdate.states",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._former[key]

    def __iter__(self) -> Iterator[Stage]:
        return iter(self._by_stage)

    def __len__(self) -> int:
        return len(self._by_stage)

    def __repr__(self) -> str:
        return f"StageCounts({self._by_stage!r})"


@attrs.frozen(slots=True)
class ProgressUpdate:
    """One snapshot of progress. Two updates are equal when they show the same
    progress: the timing fields (``elapsed``, ``rate``, ``eta``) aside.

    The words are those of :mod:`campaignkit.status`: ``counts`` holds the
    people per :class:`Stage` (:meth:`stages` those with somebody), and
    ``delivered``, ``sent``, ``failed``, ``skipped`` name four of them;
    ``done`` counts the people *settled* (out of waiting), not the delivered
    ones. What the stages were read from is kept beside them: ``statuses``,
    a campaign's (or a ``track_many`` group's) deployments by
    ``DeploymentStatus`` (``None``: not yet taken), or ``states``, a bulk
    run's inputs by ledger state (plus ``invalid`` and ``duplicate``).
    ``failures``: the most frequent failure reasons.

    For a run, ``sent`` counts the recipients the service accepted, less
    those its ``funnel`` knows delivered or failed (without one, delivery
    is tracked per launch and ``delivered`` stays 0); ``failed`` those
    rejected, ambiguous or invalid and those whose deployment failed;
    ``skipped`` the other settled inputs (duplicates, suppressed, deferred).

    ``state`` is the campaign request's (the least advanced launch's for a
    group; a run is ``PENDING`` until an input settles, ``DONE`` once every
    one has): ``DONE`` says the service took the request, not that anyone
    was sent a message, so :meth:`text` shows it in words, never alone
    beside a count;
    ``finished``: the last update. ``elapsed``: seconds since the first
    reading; ``rate``: ``done`` per second over the last minute; ``eta``:
    seconds left at that rate (None while unknown, 0.0 once ``done`` reaches
    ``total``).
    """

    done: int
    total: int
    delivered: int
    failed: int
    counts: Mapping[Stage, int] = attrs.field(hash=False)
    failures: tuple[tuple[str, int], ...] = ()
    state: CampaignState | None = None
    finished: bool = False
    sent: int = 0
    skipped: int = 0
    elapsed: float = attrs.field(default=0.0, eq=False)
    rate: float | None = attrs.field(default=None, eq=False)
    eta: float | None = attrs.field(default=None, eq=False)
    funnel: Funnel | None = attrs.field(default=None, hash=False)
    """A bulk run's funnel from its ledger (planned → accepted → delivered →
    read → replied, failures by status), where the update was made from one."""
    statuses: Mapping[DeploymentStatus | None, int] = attrs.field(factory=dict, hash=False)
    """A campaign's deployments by status (empty for a run)."""
    states: Mapping[str, int] = attrs.field(factory=dict, hash=False)
    """A run's inputs by ledger state (empty for a campaign)."""

    @property
    def fraction(self) -> float:
        """``done / total`` (0.0 while nothing is known)."""
        return self.done / self.total if self.total else 0.0

    @property
    def waiting(self) -> int:
        """Not settled yet: ``total - done``."""
        return self.total - self.done

    def stages(self) -> dict[Stage, int]:
        """People per :class:`Stage` (every one in exactly one; the stages
        with nobody left out), in the stages' order: :attr:`counts` without
        its zeros."""
        unknown = self.done - self.delivered - self.sent - self.failed - self.skipped
        found = {
            Stage.WAITING: self.waiting,
            Stage.SENT: self.sent,
            Stage.DELIVERED: self.delivered,
            Stage.FAILED: self.failed,
            Stage.SKIPPED: self.skipped,
            Stage.UNKNOWN: unknown,
        }
        return {stage: n for stage, n in found.items() if n}

    @property
    def base(self) -> str:
        """What ``total`` counts, the base of the settled share: a run's
        ``inputs``, a campaign's ``recipients``."""
        return "inputs" if self.states else "recipients"

    def summary(self) -> str:
        """One line: ``12/200 settled (6% of recipients): 188 waiting, 2 sent,
        8 delivered, 2 failed``."""
        stages = ", ".join(f"{n} {stage}" for stage, n in self.stages().items())
        stages = stages or "no deployment shown by the service yet"
        share = f"{percent(self.done, self.total)} of {self.base}"
        return f"{self.done}/{self.total} settled ({share}): {stages}"

    def text(self) -> str:
        """The update for a person: what is happening, the people per stage,
        each failure reason in words, the ETA (a chat message's text)."""
        if self.finished:
            # Ended before the request was DONE: a timeout, or tracking stopped.
            head = "Finished" if self.state is CampaignState.DONE else "Stopped following"
        elif self.state is None:
            head = "Starting"
        else:
            head = "In progress"
        if self.state is not None:
            head += f"; request {self.state.description}"
        lines = [head, self.summary()]
        lines.extend(f"{name} x{n}: {failure_words(name)}" for name, n in self.failures)
        funnel = self.funnel
        if funnel is not None and funnel.accepted:
            lines.append(
                " → ".join(
                    f"{n} {step}" if funnel.known(step) else f"{step}: not followed"
                    for step, n in funnel.steps
                )
            )
        if self.eta is not None and not self.finished and self.waiting:
            lines.append(f"about {self.eta:.0f} s left")
        return "\n".join(lines)


def percent(count: int, total: int) -> str:
    """``count`` as a share of ``total``, the way every screen shows it: to
    the precision that tells shares apart (a decimal below 10%), rounded
    down, so only all of them is 100% and only none 0%."""
    if not count or not total:
        return "0%"
    share = 100 * count / total
    if share >= 10:
        return f"{math.floor(share)}%"
    return f"{math.floor(share * 10) / 10:.1f}%" if share >= 0.1 else "<0.1%"


_RUN_FAILURE_WORDS = {
    REJECTED: "refused by the service",
    AMBIGUOUS: "may or may not have reached the service: check before resending",
    "invalid": "bad input, not sent",
}


def failure_words(name: str) -> str:
    """A failure reason in words: a deployment status's or a run's."""
    if name in _RUN_FAILURE_WORDS:
        return _RUN_FAILURE_WORDS[name]
    status = KNOWN_WIRE_STATUSES.get(name)
    return status.description if status is not None else name


def top_failures(
    counts: Iterable[tuple[str, int]], limit: int = TOP_FAILURES
) -> tuple[tuple[str, int], ...]:
    """The ``limit`` largest non-zero counts, largest first (ties by name)."""
    ranked = sorted((item for item in counts if item[1]), key=lambda item: (-item[1], item[0]))
    return tuple(ranked[:limit])


_RUN_FAILURES = (REJECTED, AMBIGUOUS, "invalid")


def run_update(
    counts: Mapping[str, int], total: int | None, done: bool, funnel: Funnel | None = None
) -> ProgressUpdate:
    """A bulk run's update from its ledger counts (``total``: the inputs, once
    the producer has read them all; ``done``: every input settled) and its
    ``funnel``: the accepted recipients it knows delivered, or failed (by
    status), are counted there, the others sent."""
    outcomes = funnel.failed if funnel is not None else {}
    failures = top_failures(
        [(state, counts.get(state, 0)) for state in _RUN_FAILURES] + list(outcomes.items())
    )
    settled = sum(n for state, n in counts.items() if state not in (PLANNED, IN_FLIGHT))
    accepted = counts.get(ACCEPTED, 0)
    delivered = min(funnel.delivered, accepted) if funnel is not None else 0
    failed_there = min(sum(outcomes.values()), accepted - delivered)
    failed = sum(counts.get(state, 0) for state in _RUN_FAILURES) + failed_there
    sent = accepted - delivered - failed_there
    if done:
        state = CampaignState.DONE
    else:
        state = CampaignState.CLAIMED if settled else CampaignState.PENDING
    states = dict(counts)
    total = max(total or 0, sum(counts.values()))
    stages = {
        Stage.WAITING: total - settled,
        Stage.SENT: sent,
        Stage.DELIVERED: delivered,
        Stage.FAILED: failed,
        Stage.SKIPPED: settled - sent - delivered - failed,
    }
    return ProgressUpdate(
        done=settled,
        total=total,
        delivered=delivered,
        sent=sent,
        skipped=stages[Stage.SKIPPED],
        failed=failed,
        counts=StageCounts(stages, states),
        failures=failures,
        state=state,
        finished=done,
        funnel=funnel,
        states=states,
    )


def campaign_update(
    counts: Mapping[DeploymentStatus | None, int], state: CampaignState | None, finished: bool
) -> ProgressUpdate:
    """The untimed update of a campaign's (or a group's) counts by status."""
    stages: dict[Stage, int] = dict.fromkeys(Stage, 0)
    for status, n in counts.items():
        stages[stage_of(status)] += n
    failures = top_failures(
        (status.value, n)
        for status, n in counts.items()
        if status is not None and status.stage is Stage.FAILED
    )
    total = sum(stages.values())
    statuses = dict(counts)
    return ProgressUpdate(
        done=total - stages[Stage.WAITING],
        total=total,
        delivered=stages[Stage.DELIVERED],
        failed=stages[Stage.FAILED],
        counts=StageCounts(stages, statuses),
        failures=failures,
        state=state,
        finished=finished,
        sent=stages[Stage.SENT],
        statuses=statuses,
    )


class Eta:
    """The rate of ``done`` over the last ``window`` seconds of observations,
    and the seconds left at that rate."""

    def __init__(self, window: float = ETA_WINDOW) -> None:
        self.window = window
        self._samples: deque[tuple[float, int]] = deque()

    def observe(self, at: float, done: int, total: int) -> tuple[float | None, float | None]:
        """Record ``done`` at ``at``; ``(rate, eta)``, each None while unknown."""
        samples = self._samples
        samples.append((at, done))
        # Keep the newest sample at or before the window's start as the anchor.
        while len(samples) > 2 and samples[1][0] <= at - self.window:
            samples.popleft()
        if done >= total > 0:
            return self._rate(at, done), 0.0
        rate = self._rate(at, done)
        return rate, (total - done) / rate if rate else None

    def _rate(self, at: float, done: int) -> float | None:
        first_at, first_done = self._samples[0]
        return (done - first_done) / (at - first_at) if at > first_at else None


Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


def check_every(every: object) -> float:
    if isinstance(every, bool) or not isinstance(every, int | float) or not every > 0:
        raise ValidationError([("every", f"must be a positive number of seconds, got {every!r}")])
    return float(every)


async def throttled(
    readings: AsyncGenerator[ProgressUpdate], every: float, clock: Clock, sleep: Sleep
) -> AsyncGenerator[ProgressUpdate]:
    """The ``readings`` (one per poll, the last one ``finished``) at most one
    per ``every`` seconds, with their timing: a reading is yielded when it shows
    other progress than the last one yielded and ``every`` seconds have passed
    since; the finished one always, once ``every`` seconds have passed.

    A reading held back is not lost: the next one shows the same progress or
    more, and a tracker polls again within its ``poll_interval`` of a change.
    """
    eta = Eta()
    started: float | None = None
    last: ProgressUpdate | None = None
    last_at = 0.0
    async with contextlib.aclosing(readings):
        async for reading in readings:
            now = clock()
            started = now if started is None else started
            rate, left = eta.observe(now, reading.done, reading.total)
            if reading.finished:
                if last is not None and last_at + every > now:
                    await sleep(last_at + every - now)
                yield attrs.evolve(reading, elapsed=clock() - started, rate=rate, eta=left)
                return
            if reading != last and (last is None or now - last_at >= every):
                last, last_at = reading, now
                yield attrs.evolve(reading, elapsed=now - started, rate=rate, eta=left)
