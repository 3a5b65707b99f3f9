"""The taskiq brokers ``campaignkit worker --broker`` names."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import tenacity
from taskiq import AsyncBroker

from .._backoff import reconnecting
from .._redaction import sdk_logger
from ..errors import ConfigurationError

if TYPE_CHECKING:
    from taskiq_redis import RedisStreamBroker

log = sdk_logger("campaignkit.workers")

_ATTEMPTS = 5  # to send or acknowledge a message; reading retries for ever


def client_name(queue: str) -> str:
    """The name a worker's Redis connections carry (``CLIENT LIST``)."""
    return "campaignkit:" + re.sub(r"[^A-Za-z0-9_.:-]", "_", queue)


def broker_from(
    spec: str, *, queue: str = "campaignkit", redeliver_after: float = 60.0
) -> AsyncBroker:
    """The taskiq broker ``spec`` names.

    ``redis://`` / ``rediss://`` / ``unix://``: a Redis streams broker on
    ``queue`` whose messages left unacknowledged ``redeliver_after`` seconds
    (their worker died) go to another worker; redelivering early is safe,
    the ledger never lets a chunk be sent twice. ``module:attribute``: your
    own broker object (RabbitMQ, NATS, ...), imported.
    """
    if spec.startswith(("redis://", "rediss://", "unix://")):
        # One message read at a time, so idle workers share the queue evenly.
        return _redis_streams()(
            spec,
            queue_name=queue,
            idle_timeout=max(1, round(redeliver_after * 1000)),
            xread_count=1,
            xread_block=1000,
            client_name=client_name(queue),
            # No read waits for ever (a reply lost with its connection, a
            # cancellation swallowed under a read): it times out, and is
            # reconnected, or ends if its task was cancelled.
            socket_timeout=10,
        )
    module, sep, attribute = spec.partition(":")
    if not sep or "://" in spec:
        raise ConfigurationError(
            f"--broker takes a redis:// URL or module:attribute of a taskiq broker, got {spec!r}"
        )
    try:
        broker = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot import the broker {spec!r}: {exc}") from None
    if inspect.isfunction(broker):
        broker = broker()
    if not isinstance(broker, AsyncBroker):
        raise ConfigurationError(f"{spec!r} is not a taskiq broker")
    return broker


def warning(what: str) -> Callable[[BaseException | None, float, int], None]:
    """What a worker says before reconnecting to the broker (one warning an attempt)."""

    def say(exc: BaseException | None, delay: float, attempt: int) -> None:
        log.warning(
            "lost the broker %s (%s: %s): reconnecting in %.1f s (attempt %d)",
            *(what, type(exc).__name__, exc, delay, attempt),
        )

    return say


T = TypeVar("T")


async def _heeding_cancellation(call: Awaitable[T]) -> T:
    """``await call``, in a task of its own: on Python 3.11 redis' connection
    pool and timeouts (their ``wait_for``) can swallow a cancellation, and
    its task then waits for ever (a read nobody ends) or goes on as if never
    cancelled (a producer stopped mid-send waiting for its next input). Here
    a cancellation ends the wait at once; ``call`` is cancelled, not awaited."""
    task = asyncio.ensure_future(call)
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:
        task.cancel()
        # It may have failed meanwhile (a connection lost as the worker
        # stops): read its error, or asyncio logs it as never retrieved.
        task.add_done_callback(_retrieve)
        raise
    return task.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _redis_streams() -> type[RedisStreamBroker]:
    from redis.asyncio import Redis
    from redis.exceptions import ConnectionError, ReadOnlyError, ResponseError, TimeoutError
    from taskiq import AckableMessage, BrokerMessage
    from taskiq_redis import RedisStreamBroker

    lost = (ConnectionError, TimeoutError, OSError)

    def failing_over(exc: BaseException) -> bool:
        """A server turned replica by a failover: its blocked reads answered
        UNBLOCKED, its writes READONLY (or a replica without its primary)."""
        return isinstance(exc, ReadOnlyError) or (
            isinstance(exc, ResponseError) and str(exc).startswith(("UNBLOCKED", "MASTERDOWN"))
        )

    def retried(exc: BaseException) -> bool:
        return isinstance(exc, lost) or failing_over(exc)

    async def a_few_times(what: str, call: Callable[[], Awaitable[None]]) -> None:
        """``call()``, made again a few times while the broker is lost."""

        async def attempt() -> None:  # a coroutine function, which tenacity awaits
            await _heeding_cancellation(call())

        await reconnecting(retried, tenacity.stop_after_attempt(_ATTEMPTS), warning(what))(attempt)

    class RedisStreams(RedisStreamBroker):
        """taskiq-redis's streams broker, with ``listen`` rewritten (which is
        why taskiq-redis is bounded above in pyproject.toml):

        - the messages of dead consumers are reclaimed before every blocking
          read (taskiq-redis 1.2 reclaims only after a read that got some: an
          idle queue never gave a dead worker's messages to anyone);
        - a lost connection (a killed client, a restart, a failover, a
          server turned replica answering UNBLOCKED or READONLY) is
          reconnected with jittered backoff, one warning per attempt, for
          ever when reading and a few times to send or acknowledge a
          message or to declare the consumer group; a consumer group lost
          with the server's data is declared again. taskiq-redis ends the
          worker on the first of these.
        """

        async def listen(self) -> AsyncGenerator[AckableMessage, None]:
            while True:
                for message_id, fields in await self._read():
                    if fields:  # None: deleted from the stream meanwhile
                        yield AckableMessage(data=fields[b"data"], ack=self._ack(message_id))

        async def _read(self) -> list[tuple[bytes, Any]]:
            """The next messages, the broker reconnected for as long as it is
            lost (each read starts its backoff anew), its consumer group
            declared again if the server lost it with its data."""
            repairs: list[Callable[[], Awaitable[object]]] = []

            def retried_read(exc: BaseException) -> bool:
                if isinstance(exc, ResponseError) and "NOGROUP" in str(exc):
                    repairs.append(self._declare_consumer_group)
                    return True
                if failing_over(exc):
                    # Its idle connections too: the name may lead to the new primary now.
                    repairs.append(lambda: self.connection_pool.disconnect(inuse_connections=False))
                return retried(exc)

            async def read() -> list[tuple[bytes, Any]]:
                while repairs:
                    await repairs[0]()
                    del repairs[0]
                async with Redis(connection_pool=self.connection_pool) as conn:
                    return await _heeding_cancellation(self._fetch(conn))

            return await reconnecting(retried_read, tenacity.stop_never, warning("while reading"))(
                read
            )

        async def _fetch(self, conn: Redis) -> list[tuple[bytes, Any]]:
            """Dead consumers' messages first, else new ones (a blocking read).

            Reclaiming before the blocking read, not after it: a connection
            cut more often than the read blocks would otherwise never
            reclaim anything, and a dead worker's chunk would wait for ever.
            """
            group, consumer, queue = self.consumer_group_name, self.consumer_name, self.queue_name
            reclaimed: Any = await conn.xautoclaim(
                queue,
                group,
                consumer,
                min_idle_time=self.idle_timeout,
                count=self.unacknowledged_batch_size,
            )
            if any(fields for _, fields in reclaimed[1]):
                return list(reclaimed[1])
            fetched: Any = await conn.xreadgroup(
                group, consumer, {queue: ">"}, block=self.block, count=self.count
            )
            return [m for _, stream in fetched for m in stream]

        def _ack(self, message_id: bytes) -> Callable[[], Awaitable[None]]:
            ack = self._ack_generator(message_id, self.queue_name)  # type: ignore[arg-type]

            async def acknowledge() -> None:
                try:
                    await a_few_times("acknowledging a message", ack)
                except (*lost, ResponseError) as exc:
                    if not (isinstance(exc, lost) or failing_over(exc)):
                        raise
                    log.warning(
                        "message %s not acknowledged: it will be delivered again and find "
                        "nothing left to send",
                        message_id.decode(),
                    )

            return acknowledge

        async def _declare_consumer_group(self) -> None:
            # Also run by startup(), after the worker said it was ready: a
            # connection dropped there ended the worker.
            await a_few_times("declaring its consumer group", super()._declare_consumer_group)

        async def kick(self, message: BrokerMessage) -> None:
            # Sent twice after a connection lost mid-command: harmless, the
            # second delivery finds nothing left to claim.
            await a_few_times("sending a message", lambda: super(RedisStreams, self).kick(message))

    return RedisStreams
