"""``CampaignTracker``: every deployment status change of a campaign, as an
async iterator, from polling the campaign's ``status_url``.

How it works (the contract is the Tracker section of DESIGN.md):

- One tenacity ``AsyncRetrying`` drives the whole tracking: each *attempt* is
  one poll (exactly one HTTP exchange through ``Transport.attempt``); the
  result predicate keeps polling until the campaign is finished; the wait
  grows (exponential, jittered) while nothing changes and returns to
  ``poll_interval`` on any change; a ``Retry-After`` on 429/503 overrides it;
  the stop is the deadline (``timeout``).
- The answer is decoded by msgspec (every type checked, in C) into records
  of plain strings that the cyclic GC does not track, and diffed against ONE
  dict ``key -> wire status`` (key: ``conversation_id``, else ``service_id``, else
  ``cellphone``). Typed :class:`~campaignkit.models.Deployment` objects are
  built only for the entries whose status changed; ``result`` is built on
  access.
- Statuses only move forward: ``None < RECEIVED < RECEIVED_BY_WORKER < RETRY <
  SUCCESS < (unknown status) < final``. A stale read that goes backwards
  (``DELIVERED`` then ``SUCCESS``) is ignored (counted in ``stats.stale``), a
  final status never changes again, so no transition is yielded twice.
- No background task: waits and polls run inside ``__anext__``, so breaking
  out of ``async for``, ``aclose()`` or cancelling the consumer leaves nothing
  running, and every HTTP exchange is finished or closed before it returns.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import random
import sys
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from itertools import compress, repeat
from operator import attrgetter, ne, or_
from typing import TYPE_CHECKING, Any, Literal, Self
from urllib.parse import quote, unquote, urlsplit

import attrs
import msgspec
import tenacity

from . import _sansio as wire
from . import errors
from ._closing import AsyncClosing
from ._convert import response_error
from ._transport import Transport, is_retryable
from ._validation import path_segment, raise_problems
from .models import CampaignAck, CampaignStatus, Deployment
from .status import CampaignState, DeploymentStatus, is_in_progress, status_from_wire

if TYPE_CHECKING:
    from .client import CampaignClient

__all__ = [
    "CampaignTracker",
    "DeploymentChange",
    "Progress",
    "TrackerGroup",
    "TrackerStats",
    "resolve_status_url",
]

Until = Literal["done", "settled"]
Target = CampaignAck | str
OnState = Callable[[CampaignState], "Awaitable[None] | None"]
Clock = Callable[[], float]

CHECKPOINT_VERSION = 1
_S = DeploymentStatus
_MISSING: Any = object()

# The forward order of statuses. A change is yielded only when the rank grows.
_UNKNOWN_RANK = 5
_FINAL_RANK = 6
_RANKS: dict[DeploymentStatus | None, int] = {
    None: 0,
    _S.RECEIVED: 1,
    _S.RECEIVED_BY_WORKER: 2,
    _S.RETRY: 3,
    _S.SUCCESS: 4,
}


def _rank(status: DeploymentStatus | None) -> int:
    rank = _RANKS.get(status)
    if rank is not None:
        return rank
    assert status is not None
    return _UNKNOWN_RANK if status.is_unknown else _FINAL_RANK


@attrs.frozen(slots=True)
class DeploymentChange:
    """One observed status change of one deployment.

    ``previous`` is None on the first sighting of a deployment with a status;
    ``current`` is never None. ``deployment`` is the deployment as read in
    the poll that showed the change (its ``status`` is ``current``).
    ``launch_request_id`` tells which launch it belongs to (it matters in the
    merged stream of :meth:`CampaignClient.track_many`).
    """

    deployment: Deployment
    previous: DeploymentStatus | None
    current: DeploymentStatus
    observed_at: datetime
    launch_request_id: str = ""


@attrs.frozen(slots=True)
class Progress:
    """Campaign progress for a progress bar or a chat message.

    ``done`` counts deployments out of progress (sent, delivered, failed, or
    an unknown status); ``failed`` those that will not be sent; ``delivered``
    those confirmed on the device (``DELIVERED``, ``PUSH_NOTIFICATION``).
    """

    done: int
    total: int
    failed: int
    delivered: int

    @property
    def fraction(self) -> float:
        """``done / total`` (0.0 while no deployment is known)."""
        return self.done / self.total if self.total else 0.0

    @classmethod
    def of(cls, counts: Mapping[DeploymentStatus | None, int]) -> Progress:
        total = done = failed = delivered = 0
        for status, count in counts.items():
            total += count
            if status is None or status.is_in_progress:
                continue
            done += count
            if status.is_failure:
                failed += count
            elif status is _S.DELIVERED or status is _S.PUSH_NOTIFICATION:
                delivered += count
        return cls(done, total, failed, delivered)


@attrs.frozen(slots=True)
class TrackerStats:
    """``polls``: HTTP exchanges made; ``retries``: failed polls that were
    retried; ``changes``: changes yielded; ``stale``: backward moves ignored;
    ``elapsed``: seconds since the first poll."""

    polls: int = 0
    retries: int = 0
    changes: int = 0
    stale: int = 0
    elapsed: float = 0.0


class _Entry(msgspec.Struct, gc=False):
    """A deployment as the diff reads it. Every field may be absent: which
    identifier is the key is decided by :func:`_entry_key`, not the decoder."""

    conversation_id: str | None = None
    service_id: str | None = None
    cellphone: str | None = None
    business_scope_id: str | None = None
    username: str | None = None
    status: str | None = None


class _Answer(msgspec.Struct, gc=False):
    """A status answer as the tracker keeps it. Neither class is tracked by
    the cyclic GC (they only hold strings), so 100,000 entries cost it nothing."""

    launch_request_id: str
    state: CampaignState = msgspec.field(name="status")
    poll_id: int
    deployments: list[_Entry]


_read_answer = msgspec.json.Decoder(_Answer).decode


def _decode_answer(body: bytes, status: int, headers: Mapping[str, str]) -> _Answer:
    """The status answer in ``body``, types checked throughout, in C."""
    try:
        return _read_answer(body)
    except msgspec.ValidationError as exc:
        raise response_error(exc) from None
    except msgspec.DecodeError as exc:
        wire.parse_json(body, status, headers)  # raises what came instead of JSON
        raise errors.ResponseError(f"unreadable answer: {exc}", path="$") from None


def _entry_key(entry: _Entry) -> str:
    """The key of one deployment entry: conversation_id, else service_id,
    else cellphone; ``""`` when it has none of them."""
    return entry.conversation_id or entry.service_id or entry.cellphone or ""


def _deployment(entry: _Entry, status: DeploymentStatus | None) -> Deployment:
    """The typed Deployment of an entry; an identifier it lacks becomes ``""``."""
    return Deployment(
        entry.conversation_id or "",
        entry.service_id or "",
        entry.cellphone or "",
        entry.business_scope_id,
        entry.username,
        status,
    )


_CONVERSATION_ID = attrgetter("conversation_id")
_STATUS = attrgetter("status")


class _View:
    """The tracker's state without I/O: one dict of current wire statuses and
    the counts by status. ``apply`` diffs one answer and returns its changes.

    It is separate from the polling so that the benchmark (and a test) can
    drive it with bytes directly.
    """

    __slots__ = ("counts", "current", "launch_request_id", "stale", "state")

    def __init__(self, launch_request_id: str) -> None:
        self.launch_request_id = launch_request_id
        self.current: dict[str, str | None] = {}
        self.counts: Counter[DeploymentStatus | None] = Counter()
        self.state: CampaignState | None = None
        self.stale = 0

    def restore(self, statuses: Mapping[str, str | None]) -> None:
        for key, raw in statuses.items():
            self.current[key] = raw
            self.counts[status_from_wire(raw)] += 1

    def apply(self, answer: _Answer, observed_at: datetime) -> list[tuple[str, DeploymentChange]]:
        """Diff ``answer`` against the current statuses; update them; return
        ``(key, change)`` for each accepted change, in answer order.

        Entries whose key and status are unchanged cost two comparisons, by
        position, in C. An entry without any identifier raises
        :class:`ResponseError` with its path, before anything is updated (the
        decoder has already checked every type).
        """
        deployments = answer.deployments
        candidates = self._candidates(deployments)
        if not candidates:
            self.state = answer.state
            return []
        return self._apply_candidates(answer, candidates, observed_at)

    def _apply_candidates(
        self, answer: _Answer, candidates: list[_Entry], observed_at: datetime
    ) -> list[tuple[str, DeploymentChange]]:
        current = self.current
        counts = self.counts
        get = current.get
        missing = _MISSING
        launch = self.launch_request_id
        stale = self.stale
        changes: list[tuple[str, DeploymentChange]] = []
        undo: list[tuple[str, Any]] = []  # (key, previous wire status or missing)
        for entry in candidates:
            key = _entry_key(entry)
            if not key:
                self._rollback(undo)
                raise _keyless(answer, entry)
            raw = entry.status
            old_raw = get(key, missing)
            if old_raw is missing:
                status = status_from_wire(raw)
                undo.append((key, missing))
                current[key] = raw
                counts[status] += 1
                if status is None:
                    continue  # known from now on; not a change yet
                previous = None
            else:
                if old_raw == raw:
                    continue
                status = status_from_wire(raw)
                previous = status_from_wire(old_raw)
                if status is previous:  # the other spelling of the same status
                    undo.append((key, old_raw))
                    current[key] = raw
                    continue
                if _rank(status) <= _rank(previous):
                    stale += 1  # a stale read going backwards, or a final status
                    continue
                undo.append((key, old_raw))
                current[key] = raw
                counts[previous] -= 1
                if not counts[previous]:
                    del counts[previous]
                counts[status] += 1
            assert status is not None
            deployment = _deployment(entry, status)
            changes.append(
                (key, DeploymentChange(deployment, previous, status, observed_at, launch))
            )
        self.stale = stale
        self.state = answer.state
        return changes

    def _rollback(self, undo: list[tuple[str, Any]]) -> None:
        """Undo a partly applied answer (only after a malformed entry)."""
        current = self.current
        for key, old_raw in reversed(undo):
            if old_raw is _MISSING:
                del current[key]
            else:
                current[key] = old_raw
        self.counts = Counter(map(status_from_wire, current.values()))

    def _candidates(self, deployments: list[_Entry]) -> list[_Entry]:
        """The entries whose (key, status) may differ from the current dict.

        The hot loop runs in C (map/compress), allocating nothing for an
        unchanged entry. The current dict keeps the answer's order (first
        sightings are inserted in answer order), so entries are first
        compared by position with its keys and values: no hashing. If the
        service reordered the answer (many mismatches), they are looked up by
        key instead. An entry without a conversation_id never matches, so
        it is always a candidate and its key is checked.
        """
        current = self.current
        if current:
            flags = map(
                or_,
                map(ne, map(_CONVERSATION_ID, deployments), current),
                map(ne, map(_STATUS, deployments), current.values()),
            )
            candidates = list(compress(deployments, flags))
            known = len(current)
            if len(deployments) > known:
                candidates.extend(deployments[known:])
            if len(candidates) * 4 <= len(deployments):
                return candidates
        old = map(current.get, map(_CONVERSATION_ID, deployments), repeat(_MISSING))
        return list(compress(deployments, map(ne, old, map(_STATUS, deployments))))

    def progress(self) -> Progress:
        return Progress.of(self.counts)

    def settled(self) -> bool:
        counts = self.counts
        return bool(counts) and not any(
            count and is_in_progress(status) for status, count in counts.items()
        )

    def result(self, answer: _Answer) -> CampaignStatus:
        """``answer`` as a CampaignStatus, each status as the tracker holds it
        (a stale backward read is not shown). Built only when asked for."""
        get = self.current.get
        built = []
        paused = gc.isenabled()
        gc.disable()  # 100,000 small objects next to the decoded answer
        try:
            for entry in answer.deployments:
                raw = get(_entry_key(entry), entry.status)
                built.append(_deployment(entry, status_from_wire(raw)))
        finally:
            if paused:
                gc.enable()
        return CampaignStatus(answer.launch_request_id, answer.state, answer.poll_id, tuple(built))


def _keyless(answer: _Answer, entry: _Entry) -> errors.ResponseError:
    # The hot loop keeps no index: it is found for the message only.
    index = next(i for i, item in enumerate(answer.deployments) if item is entry)
    return errors.ResponseError(
        "unexpected response shape: a deployment has no conversation_id, service_id or cellphone",
        path=f"$.deployments[{index}].conversation_id",
    )


def resolve_status_url(campaign_url: str, target: Target) -> tuple[str, str, str]:
    """``(url, launch_request_id, status_url as given)`` for a tracker target.

    A relative ``status_url`` is appended to ``campaign_url`` (which may carry
    a path prefix); an absolute one is accepted only on ``campaign_url``'s
    origin, so the API key never goes to another host. A bare
    ``launch_request_id`` becomes ``/v2/send-campaign/<id>``.
    """
    if isinstance(target, CampaignAck):
        status_url = target.status_url
        launch_request_id: str | None = target.launch_request_id
    elif isinstance(target, str):
        if "/" in target:
            status_url, launch_request_id = target, None
        else:
            problems: list[tuple[str, str]] = []
            segment = path_segment("launch_request_id", target, problems)
            raise_problems(problems)
            return f"{campaign_url}/v2/send-campaign/{segment}", target, target
    else:
        raise errors.ValidationError(
            [
                (
                    "target",
                    "expected a CampaignAck, a launch_request_id or a status_url, "
                    f"got {type(target).__name__}",
                )
            ]
        )
    if not isinstance(status_url, str) or not status_url.strip():
        raise errors.CampaignKitError(f"invalid status_url {status_url!r}")
    if any(ord(char) < 0x21 or char in "\\\x7f" for char in status_url):
        raise errors.CampaignKitError(
            f"refusing status_url {status_url!r}: whitespace, control characters or backslashes"
        )
    parts = urlsplit(status_url)
    if parts.scheme or parts.netloc:
        base = urlsplit(campaign_url)
        if parts.scheme.lower() not in ("http", "https") or parts.username or parts.password:
            raise errors.CampaignKitError(
                f"refusing status_url {status_url!r}: not a plain http(s) URL"
            )
        if _origin(parts) != _origin(base):
            raise errors.CampaignKitError(
                f"refusing status_url {status_url!r}: it is not on the campaign_url's origin "
                f"({base.scheme}://{base.netloc}); the API key is never sent to another host"
            )
        url = status_url
        path = parts.path
    else:
        path = status_url if status_url.startswith("/") else "/" + status_url
        url = campaign_url + path
    url = quote(url, safe=":/?#[]@!$&'()*+,;=%-._~")
    if launch_request_id is None:
        launch_request_id = unquote(path.rstrip("/").rpartition("/")[2])
        if not launch_request_id:
            raise errors.CampaignKitError(f"status_url {status_url!r} names no launch request")
    return url, launch_request_id, status_url


def _origin(parts: Any) -> tuple[str, str, int | None]:
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        raise errors.CampaignKitError(f"invalid port in {parts.geturl()!r}") from None
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port


class CampaignTracker(AsyncClosing):
    """Every deployment status change of one campaign, as an async iterator.

    Build it with :meth:`CampaignClient.track`::

        async for change in client.track(ack):
            print(change.deployment.cellphone, change.previous, "->", change.current)

    Options:

    ``until``
        ``"done"`` (default) stops after the poll that shows ``DONE``;
        ``"settled"`` goes on until the campaign is ``DONE`` and every
        deployment is out of progress (``SUCCESS`` counts as settled).
    ``poll_interval``, ``max_interval``
        Seconds between polls: ``poll_interval`` after a poll that changed
        something, then growing (exponential, jittered) up to ``max_interval``
        while nothing changes. A ``Retry-After`` answer overrides the wait.
    ``timeout``
        Seconds for the whole tracking; then :class:`campaignkit.TimeoutError`
        with ``last_status`` (the last :class:`CampaignStatus` read, or None).
    ``not_found_grace``
        Seconds during which a 404 is retried (the launch request may not be
        visible yet right after the submission); then ``NotFoundError``. A 404
        after a successful read, or after a resume, is raised at once.
    ``resume``
        A :meth:`checkpoint`: what was yielded before it is not yielded again.
    ``on_state``
        Called (and awaited, if it returns an awaitable) with the new
        ``CampaignState`` on ``PENDING -> CLAIMED -> DONE``, before the changes
        of that poll are yielded.
    ``clock``
        A monotonic clock (seconds) matching the client's ``sleep=``; for tests.

    Transient failures (timeouts, dropped connections, 429, 5xx, an answer
    that is not JSON) are retried without ending the stream and counted in
    ``stats.retries``. A JSON answer of the wrong shape raises
    :class:`ResponseError` naming the field path.
    """

    def __init__(
        self,
        client: CampaignClient,
        target: Target,
        *,
        until: Until = "done",
        poll_interval: float = 1.0,
        max_interval: float = 30.0,
        timeout: float | None = None,
        not_found_grace: float = 30.0,
        resume: Mapping[str, Any] | None = None,
        on_state: OnState | None = None,
        clock: Clock | None = None,
        _semaphore: asyncio.Semaphore | None = None,
    ) -> None:
        if until not in ("done", "settled"):
            raise errors.ValidationError([("until", f"must be 'done' or 'settled', got {until!r}")])
        problems = [
            (name, "must be a positive number")
            for name, value in (("poll_interval", poll_interval), ("max_interval", max_interval))
            if not isinstance(value, int | float) or not value > 0
        ]
        if timeout is not None and (not isinstance(timeout, int | float) or not timeout > 0):
            problems.append(("timeout", "must be a positive number or None"))
        if not isinstance(not_found_grace, int | float) or not_found_grace < 0:
            problems.append(("not_found_grace", "must be a number >= 0"))
        raise_problems(problems)
        self._transport: Transport = client.transport
        config = client.config
        url, launch_request_id, given = resolve_status_url(config.host("campaign_url"), target)
        self.launch_request_id = launch_request_id
        self.status_url = given
        self._request = wire.build_request_to_url(config, wire.CAMPAIGN_STATUS, url)
        self.until: Until = until
        self.poll_interval = float(poll_interval)
        self.max_interval = max(float(max_interval), self.poll_interval)
        self.timeout = timeout
        self.not_found_grace = float(not_found_grace)
        self._on_state = on_state
        self._clock: Clock = clock or time.monotonic
        self._sleep = self._transport.sleep
        self._semaphore = _semaphore
        self._retry_after_cap = config.retry.retry_after_cap
        self._view = _View(launch_request_id)
        self._seen_answer = False
        if resume is not None:
            self._restore(resume)
        self._answer: _Answer | None = None
        self._result: CampaignStatus | None = None
        self._buffer: deque[tuple[str, DeploymentChange]] = deque()
        self._started: float | None = None
        self._deadline: float | None = None
        self._due = 0.0
        self._quiet = 0  # polls in a row without a change
        self._failures = 0  # failed polls in a row
        self._polls = self._retries = self._changes = 0
        self._ended: float | None = None
        self._finished = False
        self._closed = False
        self._busy = False
        self._retrying = tenacity.AsyncRetrying(
            retry=(
                tenacity.retry_if_exception(self._is_transient)
                | tenacity.retry_if_result(lambda _: not self._finished)
            ),
            wait=self._wait,
            stop=self._stop,
            sleep=self._schedule,
            before_sleep=self._count_retry,
            retry_error_callback=self._timed_out,
        )
        self._attempts: tenacity.AsyncRetrying | None = None
        self._attempt: tenacity.AttemptManager | None = None

    def __repr__(self) -> str:
        return (
            f"<CampaignTracker {self.launch_request_id!r} until={self.until!r} "
            f"state={self.state} progress={self.progress}>"
        )

    # -- public state ---------------------------------------------------------

    @property
    def state(self) -> CampaignState | None:
        """The ``CampaignState`` of the last poll (None before the first)."""
        return self._view.state

    @property
    def counts(self) -> Counter[DeploymentStatus | None]:
        """Deployments by current status (``None``: not yet taken); a copy."""
        return Counter(self._view.counts)

    @property
    def progress(self) -> Progress:
        """done/total, failed and delivered, from :attr:`counts`."""
        return self._view.progress()

    @property
    def result(self) -> CampaignStatus | None:
        """The last status read, as a :class:`CampaignStatus` (built on first
        access after each poll), with the statuses as the tracker holds them.
        None before the first successful poll."""
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

        It holds what was *yielded*: changes already read but not yet taken
        from the iterator will be yielded again by a resumed tracker.
        """
        statuses = dict(self._view.current)
        _unyield(statuses, self._buffer)
        state = self._view.state
        return {
            "version": CHECKPOINT_VERSION,
            "launch_request_id": self.launch_request_id,
            "status_url": self.status_url,
            "state": None if state is None else state.value,
            "statuses": statuses,
        }

    def _restore(self, checkpoint: Mapping[str, Any]) -> None:
        if not isinstance(checkpoint, Mapping) or checkpoint.get("version") != CHECKPOINT_VERSION:
            raise errors.CampaignKitError("resume= expects a CampaignTracker.checkpoint()")
        if checkpoint.get("launch_request_id") != self.launch_request_id:
            raise errors.CampaignKitError(
                f"the checkpoint is of launch request {checkpoint.get('launch_request_id')!r}, "
                f"not {self.launch_request_id!r}"
            )
        statuses = checkpoint.get("statuses")
        state = checkpoint.get("state")
        if not isinstance(statuses, Mapping) or not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in statuses.items()
        ):
            raise errors.CampaignKitError("the checkpoint's statuses are not {key: status|null}")
        if state is not None and state not in CampaignState.__members__:
            raise errors.CampaignKitError(
                f"the checkpoint's state {state!r} is not a CampaignState"
            )
        self._view.restore(statuses)
        if state is not None:
            self._view.state = CampaignState(state)
            self._seen_answer = True

    # -- iteration ------------------------------------------------------------

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> DeploymentChange:
        if self._busy:
            raise RuntimeError("this CampaignTracker is already being iterated")
        self._busy = True
        try:
            while not self._buffer:
                if self._closed or not await self._prepare():
                    raise StopAsyncIteration
                await self._sleep_until_due()
                await self._poll()
            self._changes += 1
            return self._buffer.popleft()[1]
        finally:
            self._busy = False

    async def aclose(self) -> None:
        """Stop tracking. Nothing runs between two changes, so this only
        marks the tracker closed; it is idempotent."""
        self._closed = True
        self._finish()
        self._buffer.clear()
        self._attempt = None

    # -- polling steps (also driven by TrackerGroup) ----------------------------

    async def _prepare(self) -> bool:
        """Let tenacity decide the next poll: its wait becomes ``_due``.

        False when tracking is over; raises the final error (``NotFoundError``
        after the grace, a shape ``ResponseError``, the tracker's timeout).
        """
        if self._attempt is not None:
            return True
        if self._finished:
            return False
        if self._attempts is None:
            self._started = now = self._clock()
            self._due = now
            if self.timeout is not None:
                self._deadline = now + self.timeout
            self._attempts = self._retrying.__aiter__()
        try:
            self._attempt = await self._attempts.__anext__()
        except StopAsyncIteration:
            self._finish()
            return False
        except BaseException:
            self._finish()
            raise
        return True

    def _finish(self) -> None:
        self._finished = True
        if self._ended is None and self._started is not None:
            self._ended = self._clock()

    async def _sleep_until_due(self) -> None:
        delay = self._due - self._clock()
        if delay > 0:
            await self._sleep(delay)

    async def _poll(self) -> None:
        """One attempt: one HTTP exchange, then the diff. Cancel-safe: if it
        is cancelled, the same attempt is made again on the next step."""
        attempt = self._attempt
        assert attempt is not None
        timeout = None
        if self._deadline is not None:
            timeout = min(self._transport.config.timeout, max(self._deadline - self._clock(), 1.0))
        self._polls += 1
        try:
            if self._semaphore is None:
                answer = await self._transport.attempt(self._request, _decode_answer, timeout)
            else:
                async with self._semaphore:
                    answer = await self._transport.attempt(self._request, _decode_answer, timeout)
        except Exception:
            self._attempt = None
            self._failures += 1
            attempt.retry_state.set_exception(sys.exc_info())  # type: ignore[arg-type]
            return
        self._attempt = None
        self._failures = 0
        try:
            changed = await self._apply(answer)
        except BaseException:
            self._finish()
            raise
        attempt.retry_state.set_result(changed)

    async def _apply(self, answer: _Answer) -> bool:
        view = self._view
        previous_state = view.state
        changes = view.apply(answer, datetime.now(UTC))
        self._answer = answer
        self._result = None
        self._seen_answer = True
        if answer.state is CampaignState.DONE and (self.until == "done" or view.settled()):
            self._finish()
        self._buffer.extend(changes)
        self._quiet = 0 if changes else self._quiet + 1
        if answer.state is not previous_state and self._on_state is not None:
            outcome = self._on_state(answer.state)
            if inspect.isawaitable(outcome):
                await outcome
        return bool(changes)

    # -- tenacity hooks -------------------------------------------------------

    def _is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, errors.NotFoundError):
            assert self._started is not None
            return not self._seen_answer and self._clock() - self._started < self.not_found_grace
        if isinstance(exc, errors.ResponseError):
            return exc.path is None  # not JSON at all (a proxy page, a cut body)
        return is_retryable(self._request, exc)

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        assert outcome is not None
        if outcome.failed:
            retry_after = getattr(outcome.exception(), "retry_after", None)
            if retry_after is not None:
                return self._clamp(min(float(retry_after), self._retry_after_cap))
            wait = self._jittered(self._failures)
        elif outcome.result():
            wait = self.poll_interval
        else:
            wait = self._jittered(self._quiet)
        return self._clamp(wait)

    def _jittered(self, steps: int) -> float:
        """Exponential in ``steps`` from ``poll_interval`` up to ``max_interval``,
        with jitter in its upper half (never below ``poll_interval``)."""
        ceiling = min(self.max_interval, self.poll_interval * 2.0 ** min(steps, 32))
        return random.uniform(max(self.poll_interval, ceiling / 2), ceiling)

    def _clamp(self, wait: float) -> float:
        if self._deadline is None:
            return wait
        return max(0.0, min(wait, self._deadline - self._clock()))

    def _stop(self, retry_state: tenacity.RetryCallState) -> bool:
        return self._deadline is not None and self._clock() >= self._deadline

    async def _schedule(self, seconds: float) -> None:
        # tenacity's sleep: only remember when the next poll is due; the
        # wait itself happens in _sleep_until_due (cancel-safe, shared by groups).
        self._due = self._clock() + seconds

    def _count_retry(self, retry_state: tenacity.RetryCallState) -> None:
        outcome = retry_state.outcome
        if outcome is not None and outcome.failed:
            self._retries += 1

    def _timed_out(self, retry_state: tenacity.RetryCallState) -> None:
        outcome = retry_state.outcome
        cause = outcome.exception() if outcome is not None and outcome.failed else None
        reached = "DONE" if self.until == "done" else "DONE with every deployment settled"
        error = errors.TimeoutError(
            f"launch request {self.launch_request_id!r} was not {reached} within "
            f"{self.timeout:g} s (state {self.state}, progress {self.progress})",
            last_status=self.result,
        )
        raise error from cause


class TrackerGroup(AsyncClosing):
    """One merged stream of the changes of many launches (see
    :meth:`CampaignClient.track_many`).

    Each :class:`DeploymentChange` carries its ``launch_request_id``. At most
    ``concurrency`` status requests are in flight at once, all on the
    client's connection pool. Polls that are due together run together;
    nothing runs between two changes, so breaking out, ``aclose()`` or
    cancelling leaves no task behind. The first error of any launch (after
    its own retries) ends the stream.
    """

    def __init__(
        self,
        client: CampaignClient,
        targets: Iterable[Target],
        *,
        concurrency: int = 8,
        resume: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise errors.ValidationError([("concurrency", "must be an integer >= 1")])
        checkpoints: dict[str, Mapping[str, Any]] = {}
        if resume is not None:
            if not isinstance(resume, Mapping) or not isinstance(resume.get("trackers"), list):
                raise errors.CampaignKitError("resume= expects a TrackerGroup.checkpoint()")
            checkpoints = {cp["launch_request_id"]: cp for cp in resume["trackers"]}
        self._semaphore = asyncio.Semaphore(concurrency)
        self.trackers: dict[str, CampaignTracker] = {}
        for target in targets:
            tracker = CampaignTracker(client, target, _semaphore=self._semaphore, **options)
            if tracker.launch_request_id in self.trackers:
                continue
            cp = checkpoints.get(tracker.launch_request_id)
            if cp is not None:
                tracker._restore(cp)
            self.trackers[tracker.launch_request_id] = tracker
        self._clock: Clock = options.get("clock") or time.monotonic
        self._sleep = client.transport.sleep
        self._buffer: deque[tuple[str, DeploymentChange]] = deque()
        self._busy = False
        self._closed = False

    def __repr__(self) -> str:
        return f"<TrackerGroup of {len(self.trackers)} launches, progress={self.progress}>"

    @property
    def counts(self) -> Counter[DeploymentStatus | None]:
        """Deployments by current status over every launch."""
        total: Counter[DeploymentStatus | None] = Counter()
        for tracker in self.trackers.values():
            total.update(tracker._view.counts)
        return total

    @property
    def progress(self) -> Progress:
        return Progress.of(self.counts)

    def checkpoint(self) -> dict[str, Any]:
        """Every tracker's checkpoint; pass it as ``resume=`` to ``track_many``.
        Changes read but not yet yielded are yielded again after a resume."""
        pending: dict[str, list[tuple[str, DeploymentChange]]] = {}
        for item in self._buffer:
            pending.setdefault(item[1].launch_request_id, []).append(item)
        trackers = []
        for launch, tracker in self.trackers.items():
            cp = tracker.checkpoint()
            _unyield(cp["statuses"], pending.get(launch, ()))
            trackers.append(cp)
        return {"version": CHECKPOINT_VERSION, "trackers": trackers}

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> DeploymentChange:
        if self._busy:
            raise RuntimeError("this TrackerGroup is already being iterated")
        self._busy = True
        try:
            while not self._buffer:
                if self._closed:
                    raise StopAsyncIteration
                await self._step()
            return self._buffer.popleft()[1]
        finally:
            self._busy = False

    async def _step(self) -> None:
        active = []
        for tracker in self.trackers.values():
            if await tracker._prepare():
                active.append(tracker)
        if not active:
            self._closed = True
            return
        now = self._clock()
        due = [tracker for tracker in active if tracker._due <= now]
        if not due:
            await self._sleep(min(tracker._due for tracker in active) - now)
            return
        if len(due) == 1:
            await due[0]._poll()
        else:
            failures: list[BaseException] = []

            async def poll(tracker: CampaignTracker) -> None:
                try:
                    await tracker._poll()
                except Exception as exc:
                    failures.append(exc)

            # A TaskGroup waits for (or cancels and waits for) every poll.
            async with asyncio.TaskGroup() as group:
                for tracker in due:
                    group.create_task(poll(tracker))
            if failures:
                raise failures[0]
        for tracker in due:
            tracker._changes += len(tracker._buffer)
            self._buffer.extend(tracker._buffer)
            tracker._buffer.clear()

    async def aclose(self) -> None:
        """Stop every tracker; idempotent."""
        self._closed = True
        self._buffer.clear()
        for tracker in self.trackers.values():
            await tracker.aclose()


def _unyield(
    statuses: dict[str, str | None], pending: Iterable[tuple[str, DeploymentChange]]
) -> None:
    """Set the checkpoint ``statuses`` of changes read but not yet yielded back
    to their previous status, so that a resumed tracker yields them again."""
    for key, change in pending:
        previous = change.previous
        statuses[key] = None if previous is None else previous.value
