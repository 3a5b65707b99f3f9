"""A campaignkit bulk send on Celery with RabbitMQ (``pip install 'campaignkit[celery]'``).

Workers::

    celery -A celery_app worker --pool prefork --concurrency 4 -Q campaigns

The producer, anywhere that imports this module::

    run = asyncio.run(submit(poll_id, users_from_csv("users.csv"), run="spring"))

then follow it with ``campaignkit runs spring --journal $CAMPAIGNS_LEDGER_DSN``.

Each prefork child (a worker process) opens one CampaignClient and one
PostgresLedger when it starts (``worker_process_init``), on an event loop of
its own that every task of that child runs on, and closes them when it exits
(``worker_process_shutdown``). A child runs one task at a time, so the loop is
never entered twice; the thread and gevent pools would need a loop in a
thread of its own instead (see the Dramatiq recipe).

A message is ``(run, chunk, ledger identity)``: the users stay in the ledger,
and a worker given another ledger than the producer's gives the message back
to the queue, claiming and sending nothing.

The settings come from the environment, as a deployment gives them: the
client's from ``CAMPAIGNKIT_*``, these from ``CAMPAIGNS_*``.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from celery import Celery, Task
from celery.signals import worker_process_init, worker_process_shutdown

from campaignkit import CampaignClient
from campaignkit.bulk import UserInput
from campaignkit.errors import LedgerError
from campaignkit.ledger import PostgresLedger, WrongLedger
from campaignkit.workers import send_chunk, submit_run

BROKER_URL = os.environ.get("CAMPAIGNS_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
LEDGER_DSN = os.environ.get("CAMPAIGNS_LEDGER_DSN", "postgresql://127.0.0.1/campaigns")
QUEUE = os.environ.get("CAMPAIGNS_QUEUE", "campaigns")
# A killed worker's chunk is reported ambiguous this long after it was
# claimed: longer than any chunk's request with its retries takes.
CLAIM_TTL = float(os.environ.get("CAMPAIGNS_CLAIM_TTL", "600"))

app = Celery("campaigns", broker=BROKER_URL)
app.conf.update(
    task_default_queue=QUEUE,
    # Acknowledge a chunk's message once its task has finished, and give it
    # back to RabbitMQ when the child running it dies (SIGKILL, out of
    # memory): otherwise a chunk taken by a worker that died before claiming
    # it stays planned for good. Running it twice is safe: the ledger's claim
    # is atomic, so the second run finds nothing left to claim and returns.
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    # One message at a time per child: a dead worker holds back no other chunks.
    worker_prefetch_multiplier=1,
    # Publishing returns once RabbitMQ has the message (the producer marks a
    # chunk enqueued only then).
    broker_transport_options={"confirm_publish": True},
    broker_connection_retry_on_startup=True,
)


class _WorkerState:
    """What one worker process holds from its start to its exit: an event
    loop, and the client and ledger made on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        try:
            self.client, self.ledger = self.loop.run_until_complete(_open_client_and_ledger())
        except BaseException:
            self.loop.close()
            raise
        # One name per process in the ledger's claims: who sent what.
        self.owner = f"{socket.gethostname()}:{os.getpid()}"

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.client.aclose())
            self.loop.run_until_complete(self.ledger.aclose())
        finally:
            self.loop.close()


async def _open_client_and_ledger() -> tuple[CampaignClient, PostgresLedger]:
    client = CampaignClient()
    ledger = PostgresLedger(LEDGER_DSN, claim_ttl=CLAIM_TTL)
    try:
        await ledger.open()
    except BaseException:
        await client.aclose()
        raise
    return client, ledger


_state: _WorkerState | None = None


def _worker_state() -> _WorkerState:
    """This process's state, opened on first use (a failed opening is tried
    again by the next task: the ledger's LedgerError retries it)."""
    global _state
    if _state is None:
        _state = _WorkerState()
    return _state


@worker_process_init.connect
def _open_worker_state(**_: Any) -> None:
    _worker_state()  # at once: a wrong setting shows in the log as the worker starts


@worker_process_shutdown.connect
def _close_worker_state(**_: Any) -> None:
    global _state
    state, _state = _state, None
    if state is not None:
        state.close()


@app.task(
    name="campaigns.send_chunk",
    bind=True,
    # The ledger out of reach for longer than it waits: try again later
    # (never anyone twice), or the chunk stays planned.
    autoretry_for=(LedgerError,),
    retry_backoff=True,
    retry_backoff_max=300,
    max_retries=20,
)
def send_campaign_chunk(self: Task, run: str, chunk: str, ledger_identity: str) -> str | None:
    """Claim and send one chunk of ``run``; its outcome, or None if it was taken already."""
    state = _worker_state()
    try:
        result = state.loop.run_until_complete(
            send_chunk(
                state.client,
                state.ledger,
                run,
                chunk,
                owner=state.owner,
                ledger_identity=ledger_identity,
            )
        )
    except WrongLedger as wrong:
        # A chunk of another ledger (a worker given the wrong DSN): back to
        # the queue for that ledger's workers, however often, never dropped.
        raise self.retry(exc=wrong, countdown=5, max_retries=None) from wrong
    return None if result is None else result.outcome


async def submit(poll_id: int | str, users: UserInput, **options: Any) -> str:
    """Plan ``users`` into the ledger and send one task per chunk; the run's
    name. ``options`` are :func:`campaignkit.workers.submit_run`'s (``run``,
    ``chunk_size``, ``send_window``...); call it again with the same ``run``
    after a crash to finish, nobody twice."""

    async with PostgresLedger(LEDGER_DSN) as ledger:

        async def enqueue(run: str, chunk: str) -> None:
            # Blocks the loop until RabbitMQ confirms the message: the ledger
            # marks the chunk enqueued only then.
            send_campaign_chunk.delay(run, chunk, ledger.identity)

        return await submit_run(ledger, poll_id, users, enqueue=enqueue, **options)
