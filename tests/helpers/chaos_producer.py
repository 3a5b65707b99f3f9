"""A producer of a bulk run for the workers, in its own process, for the chaos test.

``python chaos_producer.py REDIS_URL QUEUE DSN POLL_ID RUN COUNT CHUNK_SIZE [STALL_AT]``
plans ``make_users(COUNT)`` into the run chunk by chunk (pausing a little
every chunk) and enqueues them; prints ``input read`` once it has. With
``STALL_AT`` it stops reading after that many users and waits to be
interrupted, however slow the machine. SIGUSR1 prints the stack of every
task to stderr (what the test shows when an interrupted producer hangs).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from typing import Any

from campaignkit.workers import BulkWorkers, broker_from
from helpers.bulk_child import make_users


async def paced(count: int, every: int, stall_at: int) -> AsyncIterator[Any]:
    for i, user in enumerate(make_users(count)):
        if i == stall_at:
            await asyncio.Event().wait()
        if i % every == 0:
            await asyncio.sleep(0.01)
        yield user


def dump_tasks() -> None:
    for task in asyncio.all_tasks():
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()


async def main(
    redis_url: str, queue: str, dsn: str, poll: str, run: str, count: int, chunk: int, stall_at: int
) -> None:
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump_tasks)
    broker = broker_from(redis_url, queue=queue)
    await broker.startup()
    try:
        async with BulkWorkers(broker, dsn) as bulk:
            await bulk.submit(poll, paced(count, chunk, stall_at), run=run, chunk_size=chunk)
    finally:
        await broker.shutdown()
    print("input read", flush=True)


if __name__ == "__main__":
    # Interruptible even when started with SIGINT ignored (a shell's background job).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    redis_url, queue, dsn, poll, run, count, chunk = sys.argv[1:8]
    stall_at = int(sys.argv[8]) if len(sys.argv) > 8 else -1
    asyncio.run(main(redis_url, queue, dsn, poll, run, int(count), int(chunk), stall_at))
