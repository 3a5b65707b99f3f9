"""The webhook receiver: answer each call of the service within its 10 s.

The service merges the ``user_session_keys`` of a ``200`` answer at once, so
``on_event`` runs while the call waits (a plain function in a worker thread),
for at most ``deadline`` seconds; a slower callback gets an empty answer at
the deadline, and the keys it returns later go out by
:meth:`CampaignClient.update_session` when ``client=`` was given.

This core knows no framework: the mounts (:mod:`._aiohttp`, :mod:`._asgi`,
:mod:`._django`) only read the secret header and the body their own way and
send back the :class:`Answer`.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

import orjson

from .._redaction import register, sdk_logger
from .._words import counted
from ..errors import ValidationError
from ..models import SessionKey
from ._answers import Answer, as_keys, keys_answer, refusal
from ._checks import delivery_key, problem_of
from ._dedupe import DEFAULT_RETENTION, EVENTS_NAMESPACE, DedupeStore, Pruner, RecentIds
from ._events import EventKind, WebhookEvent, parse_event
from ._late import cancel_late

logger = sdk_logger("campaignkit.webhooks")

DEFAULT_SECRET_HEADER = "X-Webhook-Secret"
DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_DEADLINE = 8.0
"""Seconds ``on_event`` has to answer: under the service's 10 s, with room for the network."""

Keys = Mapping[str, str] | Sequence[SessionKey] | None
OnEvent = Callable[[WebhookEvent], Awaitable[Keys] | Keys]


class EventRecorder(Protocol):
    """What ``ledger=`` needs: record one event on its recipient (by phone)."""

    async def record_event(self, event: WebhookEvent) -> None: ...


class SessionUpdater(Protocol):
    """What ``client=`` needs (a :class:`~campaignkit.CampaignClient`)."""

    async def update_session(self, session_external_id: str, user_session_keys: Any) -> Any: ...


BodyReader = Callable[[int], Awaitable[bytes | None]]
"""How a mount reads the request body: at most the given number of bytes,
None when the body is longer."""


class Receiver:
    """The receiver of every webhook the service sends (see
    :mod:`campaignkit.webhooks`), whatever the framework: each mount (aiohttp,
    ASGI, Django) reads the secret header and the body its own way and sends
    the :class:`Answer` of :meth:`answer` back."""

    def __init__(
        self,
        on_event: OnEvent,
        *,
        kinds: Collection[EventKind] | None = None,
        secret: str | None = None,
        secret_header: str = DEFAULT_SECRET_HEADER,
        deadline: float = DEFAULT_DEADLINE,
        dedupe: DedupeStore | None = None,
        dedupe_size: int = 100_000,
        retention: float = DEFAULT_RETENTION,
        ledger: EventRecorder | None = None,
        client: SessionUpdater | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        shutdown_grace: float = 10.0,
    ) -> None:
        problems = []
        if not 0 < deadline < 10:
            problems.append(("deadline", "must be above 0 and under the service's 10 seconds"))
        if secret is not None and not secret:
            problems.append(("secret", "must not be empty (use None for no secret)"))
        if max_body < 1:
            problems.append(("max_body", "must be at least 1 byte"))
        if retention <= 0:
            problems.append(("retention", "must be positive"))
        if kinds is not None and not all(isinstance(k, EventKind) for k in kinds):
            problems.append(("kinds", "must hold EventKind members"))
        if problems:
            raise ValidationError(problems)
        self._on_event = on_event
        self._in_thread = not _is_async(on_event)
        self.kinds = None if kinds is None else frozenset(kinds)
        register(secret)  # masked in logs and errors like the API key
        self._secret = None if secret is None else secret.encode()
        self.secret_header = secret_header
        self.deadline = deadline
        self._dedupe: DedupeStore = RecentIds(dedupe_size) if dedupe is None else dedupe
        self.retention = retention
        self._ledger = ledger
        self._client = client
        self.max_body = max_body
        self._shutdown_grace = shutdown_grace
        self._tasks: set[asyncio.Task[Any]] = set()
        self._prune = Pruner(self._dedupe, EVENTS_NAMESPACE, retention)
        self.received = 0
        """Deliveries passed to ``on_event`` (duplicates and filtered kinds excluded)."""

    def __repr__(self) -> str:
        secret = "set" if self._secret is not None else "none"
        return f"<{type(self).__name__} secret={secret} pending={len(self._tasks)}>"

    async def aclose(self) -> None:
        """Give late callbacks ``shutdown_grace`` seconds, then cancel them."""
        await cancel_late(self._tasks, self._shutdown_grace, "on_event")

    async def answer(self, given_secret: bytes | None, read_body: BodyReader) -> Answer:
        """The answer to one delivery: ``200 {"user_session_keys": [...]}`` or
        a 4xx/503. ``given_secret`` is the raw value of the ``secret_header``
        (None when absent); the body is read only once the secret is right."""
        if self._secret is not None and not hmac.compare_digest(given_secret or b"", self._secret):
            return self._refuse(401, "unauthorized", "missing or wrong webhook secret")
        body = await read_body(self.max_body)
        if body is None:
            return self._refuse(413, "too_large", f"the body exceeds {self.max_body} bytes")
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return self._refuse(400, "bad_json", "the body is not JSON (or nests too deep)")
        if not isinstance(payload, dict):
            return self._refuse(400, "not_an_object", "the body must be a JSON object")
        event = parse_event(payload)
        problem = problem_of(event)
        if problem is not None:
            return self._refuse(422, "bad_field", problem)
        if self.kinds is not None and event.kind not in self.kinds:
            return keys_answer(())
        key = delivery_key(event)
        if key is None:
            return self._refuse(400, "too_deep", "the body nests too deep")
        try:
            await self._prune()
            first = await self._dedupe.first_sighting(EVENTS_NAMESPACE, key)
        except Exception as exc:
            logger.error("webhook: the dedupe store failed, answered 503: %r", exc)
            return refusal(503, "unavailable", "duplicate detection is unavailable")
        if not first:
            logger.info("webhook: repeated %s delivery %s ignored", event.kind.value, key[-12:])
            return keys_answer(())
        self.received += 1
        await self._record(event)
        return await self._call(event, key)

    def _refuse(self, status: int, code: str, message: str) -> Answer:
        logger.warning("webhook: refused a delivery (%d %s): %s", status, code, message)
        return refusal(status, code, message)

    async def _record(self, event: WebhookEvent) -> None:
        if self._ledger is None:
            return
        try:
            await self._ledger.record_event(event)
        except Exception:
            logger.exception("webhook: the ledger could not record a %s event", event.kind.value)

    async def _call(self, event: WebhookEvent, key: str) -> Answer:
        try:
            loop = asyncio.get_running_loop()
            if self._in_thread:  # a plain function: it may block, the deadline holds
                result: Any = loop.run_in_executor(None, self._on_event, event)
            else:
                result = self._on_event(event)
            # A task of its own (also its own current_task(), for asyncio.timeout
            # and the like), which may outlive the deadline and this request.
            task = loop.create_task(_keys_of(result))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            if await self._finished_in_time(task):
                return keys_answer(task.result())  # text orjson cannot write fails here
        except Exception:
            logger.exception("webhook: on_event failed for a %s event", event.kind.value)
            # Forget the delivery so that the same call sent again is handled.
            try:
                await self._dedupe.forget(EVENTS_NAMESPACE, key)
            except Exception as exc:
                logger.error("webhook: could not forget a failed delivery: %r", exc)
            return keys_answer(())
        task.add_done_callback(lambda t: self._late(event, t))
        logger.warning("webhook: on_event passed the %.1f s deadline", self.deadline)
        return keys_answer(())

    async def _finished_in_time(self, task: asyncio.Task[Any]) -> bool:
        """Wait for ``task`` until the deadline (lighter than ``asyncio.wait``)."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()

        def wake(_: object) -> None:
            if not waiter.done():
                waiter.set_result(None)

        task.add_done_callback(wake)
        timer = loop.call_later(self.deadline, wake, None)
        try:
            await waiter
        finally:
            timer.cancel()
            task.remove_done_callback(wake)
        return task.done()

    def _late(self, event: WebhookEvent, task: asyncio.Task[tuple[SessionKey, ...]]) -> None:
        if task.cancelled():
            return
        if task.exception() is not None:
            logger.error("webhook: late on_event failed", exc_info=task.exception())
            return
        keys = task.result()
        if not keys:
            return
        if event.session_id is None:
            logger.warning(
                "webhook: %s dropped: no session id to send them to",
                counted(len(keys), "late key"),
            )
            return
        if self._client is None:
            logger.warning(
                "webhook: %s dropped: no client= to send them", counted(len(keys), "late key")
            )
            return
        update = asyncio.get_running_loop().create_task(self._update(event.session_id, keys))
        self._tasks.add(update)
        update.add_done_callback(self._tasks.discard)

    async def _update(self, session_id: str, keys: tuple[SessionKey, ...]) -> None:
        assert self._client is not None
        try:
            await self._client.update_session(session_id, keys)
        except Exception:
            logger.exception("webhook: update_session with the late keys failed")


def _is_async(on_event: OnEvent) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return any(map(inspect.iscoroutinefunction, (on_event, type(on_event).__call__)))


async def _keys_of(awaitable: Awaitable[Any]) -> tuple[SessionKey, ...]:
    result = await awaitable
    if inspect.isawaitable(result):  # a plain function that returned a coroutine
        result = await result
    return as_keys(result)
