"""The taskiq brokers ``campaignkit worker --broker`` names."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import random
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from taskiq import AsyncBroker

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from taskiq_redis import RedisStreamBroker

log = logging.getLogger("campaignkit.workers")

_ACK_ATTEMPTS = 4


def reconnect_delay(attempt: int, *, first: float = 0.1, cap: float = 5.0) -> float:
    """Seconds to wait before reconnection ``attempt`` (1, 2, ...): "full
    jitter" exponential backoff, so that workers cut off together do not
    come back together."""
    return random.uniform(0, min(cap, first * 2 ** (attempt - 1)))


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


def _redis_streams() -> type[RedisStreamBroker]:
    from redis.asyncio import Redis
    from redis.exceptions import ConnectionError, ResponseError, TimeoutError
    from taskiq import AckableMessage
    from taskiq_redis import RedisStreamBroker

    lost = (ConnectionError, TimeoutError, OSError)

    class RedisStreams(RedisStreamBroker):
        """taskiq-redis's streams broker (``listen`` rewritten, taskiq-redis is
        bounded above in pyproject.toml):

        - the messages of dead consumers are reclaimed after every read, new
          messages or not (taskiq-redis 1.2 reclaims only after a read that
          got some: an idle queue never gave a dead worker's messages to
          anyone);
        - a lost connection (a killed client, a restart, a failover) is
          reconnected with jittered backoff, one warning per attempt, and a
          consumer group lost with the server's data is declared again:
          taskiq-redis ends the worker on either;
        - an acknowledgement is retried a few times, then left to redelivery
          (which the ledger makes harmless).
        """

        async def listen(self) -> AsyncGenerator[AckableMessage, None]:
            attempt = 0
            while True:
                try:
                    async for message in self._read():
                        attempt = 0
                        yield message
                except (*lost, ResponseError) as exc:
                    if isinstance(exc, ResponseError) and "NOGROUP" not in str(exc):
                        raise
                    attempt += 1
                    delay = reconnect_delay(attempt)
                    log.warning(
                        "lost the broker (%s: %s): reconnecting in %.1f s (attempt %d)",
                        type(exc).__name__,
                        exc,
                        delay,
                        attempt,
                    )
                    await asyncio.sleep(delay)
                    if isinstance(exc, ResponseError):
                        await self._declare_consumer_group()

        async def _read(self) -> AsyncGenerator[AckableMessage, None]:
            group, consumer, queue = self.consumer_group_name, self.consumer_name, self.queue_name
            async with Redis(connection_pool=self.connection_pool) as conn:
                while True:
                    fetched: Any = await conn.xreadgroup(
                        group, consumer, {queue: ">"}, block=self.block, count=self.count
                    )
                    messages = [m for _, stream in fetched for m in stream]
                    reclaimed: Any = await conn.xautoclaim(
                        queue,
                        group,
                        consumer,
                        min_idle_time=self.idle_timeout,
                        count=self.unacknowledged_batch_size,
                    )
                    for message_id, fields in [*messages, *reclaimed[1]]:
                        if fields:  # None: deleted from the stream meanwhile
                            yield AckableMessage(data=fields[b"data"], ack=self._ack(message_id))

        def _ack(self, message_id: bytes) -> Callable[[], Awaitable[None]]:
            ack = self._ack_generator(message_id, self.queue_name)  # type: ignore[arg-type]

            async def retried() -> None:
                for attempt in range(1, _ACK_ATTEMPTS + 1):
                    try:
                        return await ack()
                    except lost as exc:
                        if attempt == _ACK_ATTEMPTS:
                            log.warning(
                                "could not acknowledge message %s (%s): it will be delivered "
                                "again and find nothing left to send",
                                message_id.decode(),
                                exc,
                            )
                            return None
                        await asyncio.sleep(reconnect_delay(attempt))
                return None

            return retried

    return RedisStreams
