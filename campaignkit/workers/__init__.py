"""Bulk sends across many worker processes and machines, on taskiq (extra ``workers``).

One run, one ledger shared by everyone (:class:`~campaignkit.ledger.PostgresLedger`
across machines), one taskiq broker of your choice::

    # tasks.py, imported by the producer and by every worker
    broker = RedisStreamBroker("redis://127.0.0.1:6379")
    bulk = BulkWorkers(broker, "postgresql://ledger-host/campaigns")

    # the producer
    await broker.startup()
    async with bulk:
        run = await bulk.submit(poll_id, users_from_csv("users.csv"), run="spring")
        async for update in bulk.updates(run):
            print(update.text())
        report = await bulk.wait(run)  # the BulkReport send_bulk gives

    # the workers: ``taskiq worker tasks:broker`` or ``campaignkit worker``

The producer streams the input into the ledger chunk by chunk (invalid inputs
and repeated phones are filed as skipped) and enqueues one message per chunk:
``(run, chunk)`` and the ledger's identity, the users stay in the ledger. A
worker on another ledger leaves the message on the queue for the workers of
that ledger, and says so (never acknowledges it away). A worker atomically claims the
chunk's planned recipients, sends them with the client's send rules and
settles the claim. A redelivered message finds nothing left to claim; a
worker killed mid-chunk leaves a claim that expires (``claim_ttl`` of the
workers' ledger) and is reported ambiguous, never resent; a restarted
producer re-enqueues the chunks its predecessor planned but may not have
enqueued, and its re-read input plans only recipients the run has not taken.
With a ``canary``, the producer enqueues the canary alone, follows and judges
it once the workers have sent it, and enqueues the rest only if it held
(``submit`` returns once it is judged).
On another task engine (Celery, arq, Dramatiq, Temporal), :func:`submit_run`
is the producer (your ``enqueue(run, chunk)`` sends the task) and
:func:`send_chunk` what the task awaits (README recipes).

The broker must redeliver a message whose worker died before acknowledging it
(Redis streams, RabbitMQ and NATS JetStream brokers do; a plain Redis list does
not): otherwise that chunk stays planned until a producer is run again.
"""

try:
    import taskiq  # noqa: F401
except ImportError:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "campaignkit.workers needs taskiq: pip install 'campaignkit[workers]'"
    ) from None

from typing import TYPE_CHECKING

from .._deprecated import renamed
from ..progress import ProgressUpdate
from ._brokers import broker_from
from ._bulk_workers import TASK_NAME, BulkWorkers
from ._runs import ChunkResult, Enqueue, send_chunk, submit_run

__all__ = [
    "TASK_NAME",
    "BulkWorkers",
    "ChunkResult",
    "Enqueue",
    "broker_from",
    "send_chunk",
    "submit_run",
]

if TYPE_CHECKING:
    RunProgress = ProgressUpdate
else:
    __getattr__ = renamed(__name__, {"RunProgress": ("campaignkit.ProgressUpdate", ProgressUpdate)})
