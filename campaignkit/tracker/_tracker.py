"""``CampaignTracker``: a tenacity loop of polls (``AsyncRetrying``), each
one HTTP exchange; its wait and stop strategies say when the next poll is due
and when tracking ends. No background task: the loop is stepped inside
``__anext__`` (its :class:`Pacer`, which does the waiting, for every consumer
of the tracker or every tracker of a group), so breaking out, ``aclose()`` or
cancelling leaves nothing running."""

from __future__ import annotations

import inspect
from collections import Counter, deque
from collections.abc import AsyncGenerator, Mapping
from datetime import UTC, datetime
from typing import Any, NoReturn, Self

import tenacity

from .. import errors
from .._backoff import RetryAfter
from .._io import telemetry
from .._io.closing import AsyncClosing
from .._io.transport import is_retryable
from .._wire import sansio as wire
from .._wire.decode import StatusAnswer, StatusEntry, decoder
from ..models import CampaignAck, CampaignStatus
from ..progress import ProgressUpdate, campaign_update
from ..status import CampaignState, DeploymentStatus
from . import _checkpoint
from ._diff import DeploymentChange, View
from ._options import StatusSource, TrackOptions
from ._pacer import Pacer
from ._records import TrackerStats
from ._schedule import PollBackoff, StopAt

_decode_answer = decoder(StatusAnswer)


class CampaignTracker(AsyncClosing):
    """Every deployment status change of one campaign, as an async iterator.

    Build it with :meth:`CampaignClient.track`, which documents the options::

        async for change in client.track(ack):
            print(change.deployment.cellphone, change.previous, "->", change.current)

    Transient failures (timeouts, dropped connections, 429, 5xx, an answer that
    is not JSON) are retried, counted in ``stats.retries``; a JSON answer of the
    wrong shape raises :class:`ResponseError` naming the field path.
    """

    keep_changes = False
    """True once the changes are iterated (see :meth:`updates`)."""

    def __init__(
        self,
        source: StatusSource,
        target: CampaignAck | str,
        options: TrackOptions,
        *,
        resume: Mapping[str, Any] | None = None,
    ) -> None:
        config = source.config
        url, launch_request_id, given = wire.resolve_status_url(config.host("campaign_url"), target)
        self.launch_request_id = launch_request_id
        self.status_url = given
        self.until = options.until
        self.timeout = options.timeout
        self._options = options
        self._source = source
        self._clock = source.clock
        self._request = wire.build_request_to_url(config, wire.CAMPAIGN_STATUS, url)
        self._view = View(launch_request_id)
        self._seen_answer = False
        if resume is not None:
            self._seen_answer = _checkpoint.restore(self._view, resume)
        self._answer: StatusAnswer | None = None
        self._result: CampaignStatus | None = None
        self._buffer: deque[tuple[str, DeploymentChange]] = deque()
        self._started: float | None = None
        self._ended: float | None = None
        self._deadline: float | None = None
        self.next_poll_at = 0.0
        """When the next poll is due, on the options' clock."""
        self._polling: tenacity.AsyncRetrying | None = None  # from the first poll on
        self._attempt: tenacity.AttemptManager | None = None  # the poll due, not yet made
        self._polls = self._retries = self._changes = 0
        self._finished = self._closed = self._busy = False
        self._pacer = Pacer(
            self.prepare_poll, lambda: self.next_poll_at, self.poll, self._clock, source.sleep
        )

    def __repr__(self) -> str:
        return (
            f"<CampaignTracker {self.launch_request_id!r} until={self.until!r} "
            f"state={self.state} progress={self.progress.summary()!r}>"
        )

    @property
    def state(self) -> CampaignState | None:
        """The ``CampaignState`` of the last poll (None before the first)."""
        return self._view.state

    @property
    def counts(self) -> Counter[DeploymentStatus | None]:
        """Deployments by current status (``None``: not yet taken); a copy."""
        return Counter(self._view.counts)

    @property
    def progress(self) -> ProgressUpdate:
        """The progress now (done/total, people per stage), from :attr:`counts`:
        :meth:`snapshot`."""
        return self.snapshot()

    @property
    def result(self) -> CampaignStatus | None:
        """The last status read (built on first access after each poll), with
        the statuses as the tracker holds them; None before the first read."""
        if self._result is None and self._answer is not None:
            self._result = self._view.result(self._answer)
        return self._result

    @property
    def stats(self) -> TrackerStats:
        started, ended = self._started, self._ended
        now = self._clock() if ended is None else ended
        elapsed = 0.0 if started is None else now - started
        return TrackerStats(self._polls, self._retries, self._changes, self._view.stale, elapsed)

    @property
    def finished(self) -> bool:
        """True once the ``until`` condition was met (or the tracker closed)."""
        return self._finished

    def checkpoint(self) -> dict[str, Any]:
        """Plain JSON-able data to resume from (``client.track(..., resume=cp)``).
        Changes read but not yet taken from the iterator are yielded again."""
        return _checkpoint.checkpoint(self._view, self.status_url, self._buffer)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> DeploymentChange:
        if self._busy:
            raise RuntimeError("this CampaignTracker is already being iterated")
        self._busy = self.keep_changes = True
        try:
            while not self._buffer:
                if not await self._pacer.advance(self):
                    raise StopAsyncIteration
            self._changes += 1
            return self._buffer.popleft()[1]
        finally:
            self._busy = False

    def updates(self, every: float = 2.0) -> AsyncGenerator[ProgressUpdate]:
        """Throttled :class:`ProgressUpdate` snapshots: at most one per
        ``every`` seconds, when the progress changed, and the finished one
        always (``every`` seconds after the one before). Iterated alone, it
        polls; beside the change iterator (in another task) it shares its
        polls and takes none of its changes.

        Until the changes are iterated (``keep_changes``), each poll keeps
        only its own changes, for a change iterator started beside updates;
        so a campaign followed through updates alone holds no more.
        """
        return self._pacer.updates(self.snapshot, every)

    def snapshot(self) -> ProgressUpdate:
        """The progress now, untimed."""
        return campaign_update(self._view.counts, self.state, self._finished)

    async def aclose(self) -> None:
        """Stop tracking; idempotent. Nothing runs between two changes."""
        self._closed = True
        self._finish()
        self._buffer.clear()
        self._attempt = None

    # -- the steps, also driven by TrackerGroup ------------------------------------

    async def prepare_poll(self) -> bool:
        """Have the next poll due (at ``next_poll_at``): the tenacity loop
        decides on the last one, and its wait sets when (:meth:`_schedule`).
        False when tracking is over; raises the error that ends it
        (``NotFoundError`` after the grace, a shape ``ResponseError``, the
        stop's ``TimeoutError``)."""
        if self._attempt is not None:
            return True
        if self._finished:
            return False
        if self._polling is None:
            self._polling = self._start_polling()
        try:
            self._attempt = await anext(self._polling)
        except BaseException:
            self._finish()
            raise
        return True

    async def poll(self) -> None:
        """One poll, the loop's attempt: one HTTP exchange, then the diff;
        its outcome (the changes read, or the failure) is the attempt's.
        Cancel-safe: if it is cancelled, it stays due and is made again on
        the next step."""
        attempt = self._attempt
        assert attempt is not None
        timeout = None
        if self._deadline is not None:
            timeout = min(self._source.config.timeout, max(self._deadline - self._clock(), 1.0))
        self._polls += 1
        try:
            answer = await self._source.attempt(self._request, _decode_answer, timeout)
        except Exception as exc:
            self._attempt = None
            attempt.retry_state.set_exception((type(exc), exc, exc.__traceback__))
            return
        self._attempt = None
        try:
            changed = await self._apply(answer)
        except BaseException:
            self._finish()
            raise
        attempt.retry_state.set_result(changed)

    def take_changes(self) -> list[tuple[str, DeploymentChange]]:
        """The changes read and not yet yielded, handed to a group that yields them."""
        changes = list(self._buffer)
        self._buffer.clear()
        self._changes += len(changes)
        return changes

    def collect_changed(self) -> list[StatusEntry]:
        """From now on, each poll appends the entries of the deployments whose
        status changed to the list returned (their ``status`` is the new one,
        as on the wire), and makes no :class:`DeploymentChange`: the iterator
        then yields nothing. For a reader of the latest statuses alone (bulk
        follow), which needs neither the objects nor their cost (benchmarks
        row 15)."""
        entries: list[StatusEntry] = []
        self._view.changed = entries
        return entries

    async def advance(self) -> bool:
        """Make the next poll, waiting until it is due; False once tracking is
        over (the error that ended it is raised, as the iterator raises it)."""
        return await self._pacer.advance(self)

    def held_counts(self) -> Counter[DeploymentStatus | None]:
        """:attr:`counts` without the copy, for a group's totals."""
        return self._view.counts

    def _start_polling(self) -> tenacity.AsyncRetrying:
        """The loop: poll again after every answer until tracking is over,
        and after transient failures; wait by ``wait=`` (default
        :class:`PollBackoff`), a ``Retry-After`` first; stop by ``stop=``
        (default :class:`StopAt` the ``timeout``, if any)."""
        options = self._options
        self._started = self.next_poll_at = now = self._clock()
        stop = options.stop
        if self.timeout is not None:
            self._deadline = now + self.timeout
            stop = StopAt(self._clock, self._deadline)
        wait = options.wait or PollBackoff(options.poll_interval, options.max_interval)
        polling = tenacity.AsyncRetrying(
            retry=(
                tenacity.retry_if_result(lambda _: not self._finished)
                | tenacity.retry_if_exception(self._is_transient)
            ),
            wait=RetryAfter(wait, self._source.config.retry.retry_after_cap),
            stop=tenacity.stop_never if stop is None else stop,
            sleep=self._schedule,
            before_sleep=self._count_retry,
            retry_error_callback=self._stopped,
        )
        return aiter(polling)

    async def _schedule(self, wait: float) -> None:
        """The loop's sleep: set when the next poll is due (never past the
        deadline, so the last poll is made at it). The :class:`Pacer` waits
        until then, for every consumer or beside a group's other trackers."""
        now = self._clock()
        if self._deadline is not None:
            wait = max(0.0, min(wait, self._deadline - now))
        self.next_poll_at = now + wait

    def _count_retry(self, retry_state: tenacity.RetryCallState) -> None:
        if retry_state.outcome is not None and retry_state.outcome.failed:
            self._retries += 1

    def _stopped(self, retry_state: tenacity.RetryCallState) -> NoReturn:
        """The stop strategy ended tracking: a ``TimeoutError``, caused by
        the last poll's failure if it failed."""
        outcome = retry_state.outcome
        assert outcome is not None
        raise self._timeout_error() from (outcome.exception() if outcome.failed else None)

    async def _apply(self, answer: StatusAnswer) -> int:
        view = self._view
        previous_state = view.state
        collected = view.changed
        before = 0 if collected is None else len(collected)
        changes = view.apply(answer, datetime.now(UTC))
        changed = len(changes) if collected is None else len(collected) - before
        telemetry.polled(changed)
        self._answer = answer
        self._result = None
        self._seen_answer = True
        if answer.status is CampaignState.DONE and (self.until == "done" or view.settled()):
            self._finish()
        if not self.keep_changes:  # see updates()
            self._buffer.clear()
        self._buffer.extend(changes)
        on_state = self._options.on_state
        if answer.status is not previous_state and on_state is not None:
            outcome = on_state(answer.status)
            if inspect.isawaitable(outcome):
                await outcome
        return changed

    def _finish(self) -> None:
        self._finished = True
        if self._ended is None and self._started is not None:
            self._ended = self._clock()

    def _is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, errors.NotFoundError):
            assert self._started is not None
            grace = self._options.not_found_grace
            return not self._seen_answer and self._clock() - self._started < grace
        if isinstance(exc, errors.ResponseError):
            return exc.path is None  # not JSON at all (a proxy page, a cut body)
        return is_retryable(self._request, exc)

    def _timeout_error(self) -> errors.TimeoutError:
        reached = "DONE" if self.until == "done" else "DONE with every deployment settled"
        if self.timeout is None:
            within = "when its stop strategy ended tracking"
        else:
            within = f"within {self.timeout:g} s"
        return errors.TimeoutError(
            f"launch request {self.launch_request_id!r} was not {reached} {within} "
            f"(state {self.state}, progress {self.progress.summary()})",
            last_status=self.result,
        )
