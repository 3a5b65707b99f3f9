"""The taskiq brokers ``campaignkit worker --broker`` names."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from taskiq import AsyncBroker

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from taskiq_redis import RedisStreamBroker


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
    from taskiq import AckableMessage
    from taskiq_redis import RedisStreamBroker

    class RedisStreams(RedisStreamBroker):
        """taskiq-redis's streams broker, reclaiming the messages of dead
        consumers after every read, new messages or not (taskiq-redis 1.2
        reclaims only after a read that got some: an idle queue never gave
        a dead worker's messages to anyone)."""

        async def listen(self) -> AsyncGenerator[AckableMessage, None]:
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
                            yield AckableMessage(
                                data=fields[b"data"], ack=self._ack_generator(message_id, queue)
                            )

    return RedisStreams
