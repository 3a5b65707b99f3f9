"""Bulk sends: stream any number of users to a poll in chunks, exactly once.

``send_bulk`` reads its input lazily (a bounded queue sits between the reader
and the senders, so at most ``(2 * concurrency + 1) * chunk_size`` users are
held at a time), validates each user with the client's own validation, drops
repeated phone numbers, and sends chunks of ``chunk_size`` users with bounded
concurrency and the client's send rules: a 429 waits and is retried, a connect
failure before any byte was written is retried, and anything after which the
chunk may have reached the service makes the chunk *ambiguous*: reported,
never resent automatically.

Every input ends in exactly one bucket of the :class:`BulkReport`:

- ``accepted``: the chunk was answered ``202`` (its :class:`CampaignAck` is
  kept, for ``client.track``/``track_many``);
- ``rejected``: the chunk surely did not take effect (a 4xx answer, a 429 or a
  connect failure after every retry, or a 401/404 on an earlier chunk, after
  which the rest are not sent): safe to send again;
- ``ambiguous``: the chunk may or may not have reached the service (a 5xx, a
  timeout or a dropped connection after the request was written, or a chunk
  that was in flight when a journaled run was killed): check before resending;
- ``invalid``: the user failed validation (or could not be read), not sent;
- ``duplicate``: the phone (country code + normalised cellphone) was already
  seen earlier in the input, not sent.

Memory: the seen-phone set is the only structure that grows with the input; it
packs each phone into 8 bytes of an open-addressing table kept at most half
full (about 16 bytes a phone, 16 MB for 1,000,000), instead of the ~100 bytes a
``set`` of strings costs. The report keeps, per chunk, the input positions of
its users (8 bytes each) and the ack or error, but the :class:`User` objects
only for rejected and ambiguous chunks (the ones a caller may retry), and for
invalid and duplicate inputs. Accepted chunks drop their users unless
``keep_accepted_users=True``: ``report.users_for("accepted")`` needs it.

With ``journal=`` (an SQLite file path) each chunk's state is written before
and after its request; re-running the same call (same input in the same order,
same ``chunk_size``) after a crash skips accepted chunks, reports chunks that
were in flight as ambiguous, and sends only the rest.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import os
import time
from array import array
from collections.abc import (
    AsyncIterable,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeVar

import attrs
import orjson

from . import _sansio as wire
from ._csv import InvalidInput, ausers_from_csv, users_from_csv
from ._journal import ACCEPTED, AMBIGUOUS, IN_FLIGHT, REJECTED, Journal
from ._phones import PhoneSet
from ._transport import Sleep
from ._validation import Problems, path_segment, raise_problems, user_wire
from .errors import (
    AmbiguousSendError,
    AuthenticationError,
    CampaignKitError,
    NotFoundError,
)
from .models import CampaignAck, SessionKey, User

if TYPE_CHECKING:
    from .client import CampaignClient

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "BulkChunk",
    "BulkProgress",
    "BulkReport",
    "DuplicateUser",
    "InvalidInput",
    "InvalidUser",
    "Outcome",
    "ausers_from_csv",
    "send_bulk",
    "users_from_csv",
]

logger = logging.getLogger("campaignkit.bulk")

T = TypeVar("T")
Outcome = Literal["accepted", "rejected", "ambiguous", "invalid", "duplicate"]
OUTCOMES: Final = ("accepted", "rejected", "ambiguous", "invalid", "duplicate")

DEFAULT_CHUNK_SIZE: Final = 1000
"""Users per request. The spec states no maximum users per campaign request;
1000 keeps a body near 100 KB and a lost chunk small."""

PROGRESS_INTERVAL: Final = 0.1
"""Seconds between two ``on_progress`` calls (the last call always happens)."""

_USER_FIELDS: Final = frozenset(
    {"cellphone", "country_code", "user_session_keys", "deployment_eta"}
)
_DECODE_ACK = wire.decoder(CampaignAck)
_FATAL = (AuthenticationError, NotFoundError)
# The BulkProgress count of each chunk outcome (users of rejected chunks "failed").
_PROGRESS_FIELD: Final = {"accepted": "accepted", "rejected": "failed", "ambiguous": "ambiguous"}


# -- public records -----------------------------------------------------------


@attrs.frozen
class InvalidUser:
    """An input that was not sent: its 0-based input ``position`` and why."""

    position: int
    reason: str
    row: int | None = None
    value: Any = attrs.field(default=None, repr=False, eq=False)
    """The input item as given (a User, a dict or an :class:`InvalidInput`)."""


@attrs.frozen
class DuplicateUser:
    """A user not sent because its phone came earlier in the input."""

    position: int
    phone: str
    user: User = attrs.field(repr=False, eq=False)


@attrs.frozen
class BulkChunk:
    """One chunk of users and what became of it.

    ``chunk_id`` is the journal identity (a hash of the poll id and the
    chunk's wire users); ``positions`` are the input positions of its users;
    ``users`` is None for accepted chunks unless ``keep_accepted_users``.
    ``resumed`` marks an outcome read from the journal of an earlier run.
    """

    index: int
    chunk_id: str = attrs.field(repr=lambda v: v[:12])
    outcome: Literal["accepted", "rejected", "ambiguous"]
    size: int
    ack: CampaignAck | None = None
    error: CampaignKitError | None = attrs.field(default=None, repr=False)
    resumed: bool = False
    positions: Sequence[int] = attrs.field(factory=tuple, repr=False, eq=False)
    users: tuple[User, ...] | None = attrs.field(default=None, repr=False, eq=False)


@attrs.frozen
class BulkProgress:
    """Counts of users so far (``validated`` counts every input read)."""

    validated: int = 0
    sent: int = 0
    accepted: int = 0
    failed: int = 0
    """Users of rejected chunks."""
    ambiguous: int = 0
    invalid: int = 0
    duplicates: int = 0


UserInput: TypeAlias = (
    Iterable[User | Mapping[str, Any] | InvalidInput]
    | AsyncIterable[User | Mapping[str, Any] | InvalidInput]
)
"""What ``send_bulk`` reads: Users, wire-shaped dicts or :class:`InvalidInput`."""
JournalPath: TypeAlias = "str | os.PathLike[str]"
ProgressCallback: TypeAlias = Callable[[BulkProgress], Awaitable[None] | None]


@attrs.define(repr=False)
class BulkReport:
    """Where every input of a :func:`send_bulk` call ended up.

    ``accepted``, ``rejected`` and ``ambiguous`` are chunks (in input order);
    ``invalid`` and ``duplicates`` are single inputs. ``total`` counts every
    input read; ``elapsed`` is in seconds.
    """

    poll_id: str
    accepted: list[BulkChunk] = attrs.Factory(list)
    rejected: list[BulkChunk] = attrs.Factory(list)
    ambiguous: list[BulkChunk] = attrs.Factory(list)
    invalid: list[InvalidUser] = attrs.Factory(list)
    duplicates: list[DuplicateUser] = attrs.Factory(list)
    total: int = 0
    elapsed: float = 0.0
    keeps_accepted_users: bool = False

    @property
    def acks(self) -> list[CampaignAck]:
        """The acknowledgements of the accepted chunks (for ``client.track_many``)."""
        return [chunk.ack for chunk in self.accepted if chunk.ack is not None]

    @property
    def launch_request_ids(self) -> list[str]:
        return [ack.launch_request_id for ack in self.acks]

    @property
    def counts(self) -> dict[str, int]:
        """Users per outcome; they add up to ``total``."""
        return {
            "accepted": sum(chunk.size for chunk in self.accepted),
            "rejected": sum(chunk.size for chunk in self.rejected),
            "ambiguous": sum(chunk.size for chunk in self.ambiguous),
            "invalid": len(self.invalid),
            "duplicate": len(self.duplicates),
        }

    @property
    def complete(self) -> bool:
        """Whether every valid, unique user is known to be accepted."""
        return not self.rejected and not self.ambiguous

    def users_for(self, outcome: Outcome) -> list[Any]:
        """The inputs of one outcome, in input order, for a deliberate retry.

        ``"invalid"`` gives the items as they were given (Users, dicts, or
        :class:`InvalidInput`); the others give :class:`User` objects.
        ``"accepted"`` needs ``send_bulk(..., keep_accepted_users=True)``.
        """
        if outcome == "invalid":
            return [item.value for item in self.invalid]
        if outcome == "duplicate":
            return [item.user for item in self.duplicates]
        if outcome not in ("accepted", "rejected", "ambiguous"):
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        if outcome == "accepted" and not self.keeps_accepted_users:
            raise ValueError(
                "accepted users are not kept (to save memory): "
                "pass keep_accepted_users=True to send_bulk"
            )
        chunks: list[BulkChunk] = getattr(self, outcome)
        return [user for chunk in chunks for user in (chunk.users or ())]

    def __repr__(self) -> str:
        counts = self.counts
        return (
            f"<BulkReport poll_id={self.poll_id!r} total={self.total} "
            f"accepted={counts['accepted']} ({len(self.accepted)} chunks) "
            f"rejected={counts['rejected']} ({len(self.rejected)} chunks) "
            f"ambiguous={counts['ambiguous']} ({len(self.ambiguous)} chunks) "
            f"invalid={counts['invalid']} duplicate={counts['duplicate']} "
            f"elapsed={self.elapsed:.2f}s>"
        )


# -- send_bulk --------------------------------------------------------------------


@attrs.define
class _Chunk:
    index: int
    chunk_id: str
    body: bytes
    users: tuple[User, ...]
    positions: array[int]


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _as_user(item: Any) -> tuple[User | None, str | None]:
    """A User from a User or a wire-shaped dict, or the reason it is not one."""
    if isinstance(item, User):
        return item, None
    if isinstance(item, Mapping):
        unknown = [str(name) for name in item if name not in _USER_FIELDS]
        if unknown:
            return None, f"unknown field(s): {', '.join(sorted(unknown))}"
        missing = [name for name in ("cellphone", "country_code") if name not in item]
        if missing:
            return None, f"missing field(s): {', '.join(missing)}"
        keys = item.get("user_session_keys", ())
        if isinstance(keys, list | tuple):
            converted: list[Any] = []
            for key in keys:
                if isinstance(key, Mapping):
                    if set(key) != {"key", "value"}:
                        return None, "each user_session_keys item needs exactly 'key' and 'value'"
                    key = SessionKey(key["key"], key["value"])
                converted.append(key)
            keys = converted
        user = User(
            cellphone=item["cellphone"],
            country_code=item["country_code"],
            user_session_keys=keys,
            deployment_eta=item.get("deployment_eta"),
        )
        return user, None
    return None, f"expected a User or a dict, got {type(item).__name__}"


class _RateLimiter:
    """Spaces request starts at least ``1 / rate`` seconds apart, waiting with
    the client's ``sleep`` (which tests inject)."""

    def __init__(self, rate: float, sleep: Sleep) -> None:
        self._interval = 1.0 / rate
        self._next = 0.0
        self._sleep = sleep

    async def wait(self) -> None:
        now = asyncio.get_running_loop().time()
        slot = max(now, self._next)
        self._next = slot + self._interval
        if slot > now:
            await self._sleep(slot - now)


class _BulkSend:
    def __init__(
        self,
        client: CampaignClient,
        poll_id: str,
        segment: str,
        *,
        chunk_size: int,
        concurrency: int,
        rate_limit: float | None,
        journal: Journal | None,
        on_progress: Callable[[BulkProgress], object] | None,
        keep_accepted_users: bool,
        timeout: float | None,
        max_retries: int | None,
    ) -> None:
        self.client = client
        self.segment = segment
        self.chunk_size = chunk_size
        self.concurrency = concurrency
        self.limiter = (
            None if rate_limit is None else _RateLimiter(rate_limit, client._transport.sleep)
        )
        self.journal = journal
        self.on_progress = on_progress
        self.keep_accepted_users = keep_accepted_users
        self.timeout = timeout
        self.max_retries = max_retries
        self.report = BulkReport(poll_id, keeps_accepted_users=keep_accepted_users)
        self.seen = PhoneSet()
        self.queue: asyncio.Queue[_Chunk | None] = asyncio.Queue(maxsize=concurrency)
        self.fatal: CampaignKitError | None = None
        self.progress = {name: 0 for name in attrs.fields_dict(BulkProgress)}
        self._last_progress = 0.0
        self._input_error: BaseException | None = None
        self._chunks = 0
        self._callbacks: set[asyncio.Future[Any]] = set()
        self._wires: list[dict[str, Any]] = []
        self._users: list[User] = []
        self._positions: array[int] = array("Q")

    # -- progress

    def _advance(self, increments: Mapping[str, int] | None = None, force: bool = False) -> None:
        for name, value in (increments or {}).items():
            self.progress[name] += value
        if self.on_progress is None:
            return
        now = time.monotonic()
        if not force and now - self._last_progress < PROGRESS_INTERVAL:
            return
        self._last_progress = now
        try:
            result = self.on_progress(BulkProgress(**self.progress))
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._callbacks.add(task)
                task.add_done_callback(self._callback_done)
        except Exception:
            # Stopping a send half-way would leave chunks in flight: log instead.
            logger.exception("on_progress raised; the bulk send goes on")

    async def _cancel_callbacks(self) -> None:
        """The send has failed: leave no on_progress call running after it."""
        callbacks = set(self._callbacks)
        for task in callbacks:
            task.cancel()
        await asyncio.gather(*callbacks, return_exceptions=True)

    def _callback_done(self, task: asyncio.Future[Any]) -> None:
        self._callbacks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("on_progress raised; the bulk send goes on", exc_info=task.exception())

    # -- reading and chunking

    async def read(self, users: Iterable[Any] | AsyncIterable[Any]) -> None:
        try:
            await self._read(users)
        except Exception as exc:
            # Send what is queued, then re-raise from run().
            self._input_error = exc
        # Not in a finally: once cancelled, a put on a full queue would hang.
        for _ in range(self.concurrency):
            await self.queue.put(None)

    async def _read(self, users: Iterable[Any] | AsyncIterable[Any]) -> None:
        # The per-user work is synchronous (_take); the loop awaits only to hand
        # over a full chunk, and now and then so a long input cannot starve it.
        take, chunk_size = self._take, self.chunk_size
        if isinstance(users, AsyncIterable):
            async for item in users:
                if take(item) == chunk_size:
                    await self._emit()
                elif not self.report.total & 511:
                    await asyncio.sleep(0)
        else:
            for item in users:
                if take(item) == chunk_size:
                    await self._emit()
                elif not self.report.total & 511:
                    await asyncio.sleep(0)
        if self._wires:
            await self._emit()

    def _take(self, item: Any) -> int:
        """Validate one input and file it; the size of the chunk being built."""
        report, progress = self.report, self.progress
        position = report.total
        report.total += 1
        progress["validated"] += 1
        if not position & 255:
            self._advance()
        if isinstance(item, InvalidInput):
            report.invalid.append(InvalidUser(position, item.reason, item.row, item))
            progress["invalid"] += 1
            return len(self._wires)
        user, reason = _as_user(item)
        entry = None
        if user is not None:
            problems: Problems = []
            # A constant path while valid; the real one is only built for a message.
            entry = user_wire(user, "users[]", problems)
            if entry is None:
                problems = []
                user_wire(user, f"users[{position}]", problems)
                reason = "; ".join(f"{path}: {message}" for path, message in problems)
        if entry is None or user is None:
            report.invalid.append(InvalidUser(position, reason or "invalid", None, item))
            progress["invalid"] += 1
            return len(self._wires)
        phone = entry["country_code"] + entry["cellphone"]
        if not self.seen.add(phone):
            report.duplicates.append(DuplicateUser(position, phone, user))
            progress["duplicates"] += 1
            return len(self._wires)
        self._wires.append(entry)
        self._users.append(user)
        self._positions.append(position)
        return len(self._wires)

    async def _emit(self) -> None:
        wires, users, positions = self._wires, self._users, self._positions
        self._wires, self._users, self._positions = [], [], array("Q")
        index = self._chunks
        self._chunks += 1
        users_json = orjson.dumps(wires, option=orjson.OPT_SORT_KEYS)
        digest = hashlib.sha256(self.segment.encode() + b"\n" + users_json).hexdigest()
        chunk = _Chunk(index, digest, b'{"users":' + users_json + b"}", tuple(users), positions)
        if self.journal is not None:
            state, detail = await self.journal.plan(digest, self.segment, index, len(users))
            if state == ACCEPTED:
                ack = CampaignAck(**orjson.loads(detail or "{}"))
                self._finish(chunk, "accepted", ack=ack, resumed=True)
                return
            if state in (IN_FLIGHT, AMBIGUOUS):
                why = (
                    "was in flight when an earlier run stopped"
                    if state == IN_FLIGHT
                    else f"was ambiguous in an earlier run ({detail})"
                )
                error = AmbiguousSendError(
                    f"this chunk {why}: it may or may not have reached the service, "
                    "and was not resent: check before sending again",
                    users=chunk.users,
                )
                if state == IN_FLIGHT:
                    await self.journal.mark(digest, AMBIGUOUS, why)
                self._finish(chunk, "ambiguous", error=error, resumed=True)
                return
            # PLANNED or REJECTED: it surely did not take effect; send it.
        await self.queue.put(chunk)

    # -- sending

    async def send(self) -> None:
        while True:
            chunk = await self.queue.get()
            if chunk is None:
                return
            await self._send(chunk)

    async def _send(self, chunk: _Chunk) -> None:
        if self.fatal is not None:
            if self.journal is not None:
                await self.journal.mark(chunk.chunk_id, REJECTED, _error_text(self.fatal))
            self._finish(chunk, "rejected", error=self.fatal)
            return
        if self.limiter is not None:
            await self.limiter.wait()
        if self.journal is not None:
            # Durable before the request leaves (see Journal).
            await self.journal.mark(chunk.chunk_id, IN_FLIGHT)
        request = wire.build_request(
            self.client.config,
            wire.SEND_CAMPAIGN,
            path_params={"poll_id": self.segment},
            json=orjson.Fragment(chunk.body),
            users=chunk.users,
        )
        self._advance({"sent": len(chunk.users)})
        outcome: Literal["accepted", "rejected", "ambiguous"]
        ack: CampaignAck | None = None
        error: CampaignKitError | None = None
        try:
            ack = await self.client._transport.call(
                request, _DECODE_ACK, timeout=self.timeout, max_retries=self.max_retries
            )
            outcome, state, detail = "accepted", ACCEPTED, orjson.dumps(attrs.asdict(ack)).decode()
        except AmbiguousSendError as exc:
            outcome, state, detail, error = "ambiguous", AMBIGUOUS, _error_text(exc), exc
        except CampaignKitError as exc:
            outcome, state, detail, error = "rejected", REJECTED, _error_text(exc), exc
            if isinstance(exc, _FATAL) and self.fatal is None:
                self.fatal = exc
        if self.journal is not None:
            # Shielded: a cancellation now must not lose a known outcome.
            await asyncio.shield(self.journal.mark(chunk.chunk_id, state, detail))
        self._finish(chunk, outcome, ack=ack, error=error)

    def _finish(
        self,
        chunk: _Chunk,
        outcome: Literal["accepted", "rejected", "ambiguous"],
        *,
        ack: CampaignAck | None = None,
        error: CampaignKitError | None = None,
        resumed: bool = False,
    ) -> None:
        keep = outcome != "accepted" or self.keep_accepted_users
        result = BulkChunk(
            chunk.index,
            chunk.chunk_id,
            outcome,
            len(chunk.users),
            ack=ack,
            error=error,
            resumed=resumed,
            positions=chunk.positions,
            users=chunk.users if keep else None,
        )
        getattr(self.report, outcome).append(result)
        self._advance({_PROGRESS_FIELD[outcome]: len(chunk.users)})

    async def run(self, users: Iterable[Any] | AsyncIterable[Any]) -> BulkReport:
        started = time.monotonic()
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.read(users))
                for _ in range(self.concurrency):
                    group.create_task(self.send())
        except BaseException as failed:  # a sender's error, or cancelled
            await self._cancel_callbacks()
            if isinstance(failed, BaseExceptionGroup) and len(failed.exceptions) == 1:
                raise failed.exceptions[0] from None
            raise
        report = self.report
        for name in ("accepted", "rejected", "ambiguous"):
            getattr(report, name).sort(key=lambda chunk: chunk.index)
        report.elapsed = time.monotonic() - started
        self._advance(force=True)
        if self._callbacks:  # async on_progress calls still running
            await asyncio.gather(*self._callbacks, return_exceptions=True)
        if self._input_error is not None:
            error = self._input_error
            error.add_note(
                f"send_bulk: the input raised after {report.total} items; the full chunks "
                "read before it were sent (see the journal, if any), the partial one was not"
            )
            raise error
        return report


async def send_bulk(
    client: CampaignClient,
    poll_id: str | int,
    users: UserInput,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    concurrency: int = 4,
    rate_limit: float | None = None,
    journal: JournalPath | None = None,
    on_progress: ProgressCallback | None = None,
    keep_accepted_users: bool = False,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> BulkReport:
    """Send ``users`` to ``poll_id`` in chunks; see the module docstring.

    ``users``: any iterable or async iterable of :class:`User` or wire-shaped
    dicts (``cellphone``, ``country_code``, ``user_session_keys`` as a list of
    ``{key, value}`` or a mapping, ``deployment_eta``), read lazily.
    ``rate_limit``: at most that many chunk requests started per second.
    ``journal``: an SQLite file making the call resumable after a crash; a
    resumed call must get the same input in the same order and the same
    ``chunk_size``. ``on_progress`` receives a :class:`BulkProgress` at most
    every 0.1 s and once at the end (an exception in it is logged, not raised).

    Raises :class:`ValidationError` for a bad ``poll_id`` or option before
    anything is sent; per-user problems and request failures go in the report.
    """
    problems: Problems = []
    segment = path_segment("poll_id", poll_id, problems)
    for name, value in (("chunk_size", chunk_size), ("concurrency", concurrency)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append((name, f"must be an int >= 1, got {value!r}"))
    if rate_limit is not None and (
        isinstance(rate_limit, bool)
        or not isinstance(rate_limit, int | float)
        or not rate_limit > 0
    ):
        problems.append(("rate_limit", f"must be a number > 0 (requests/s), got {rate_limit!r}"))
    if isinstance(users, str | bytes | Mapping) or not isinstance(users, Iterable | AsyncIterable):
        problems.append(("users", f"expected an iterable of users, got {type(users).__name__}"))
    raise_problems(problems)
    store = None if journal is None else Journal(journal)
    try:
        if store is not None:
            await store.open(segment, chunk_size)
        bulk = _BulkSend(
            client,
            str(poll_id),
            segment,
            chunk_size=chunk_size,
            concurrency=concurrency,
            rate_limit=rate_limit,
            journal=store,
            on_progress=on_progress,
            keep_accepted_users=keep_accepted_users,
            timeout=timeout,
            max_retries=max_retries,
        )
        return await bulk.run(users)
    finally:
        if store is not None:
            await store.close()
