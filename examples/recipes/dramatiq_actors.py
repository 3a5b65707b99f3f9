"""A campaignkit bulk send on Dramatiq with RabbitMQ (``pip install 'campaignkit[dramatiq]'``).

Workers::

    dramatiq dramatiq_actors --processes 2 --threads 4 --queues campaigns

The producer, anywhere that imports this module::

    run = asyncio.run(submit(poll_id, users_from_csv("users.csv"), run="spring"))

then follow it with ``campaignkit runs spring --journal $CAMPAIGNS_LEDGER_DSN``.

The chunk actor is async: Dramatiq's ``AsyncIO`` middleware runs it on one
event loop thread per worker process, which every actor thread of that
process shares. ``WorkerState`` (a middleware) opens one CampaignClient and
one PostgresLedger on that loop before the worker takes any message, and
closes them before it shuts down.

Dramatiq acknowledges a message only once its actor has finished, so the
chunk of a worker that dies mid-task goes back to RabbitMQ for another
worker; a failed actor is retried with backoff (the ``Retries`` middleware).
Running a chunk twice is safe: the ledger's claim is atomic, and the second
run finds nothing left to claim.

A message is ``(run, chunk, ledger identity)``: the users stay in the ledger,
and a worker given another ledger than the producer's gives the message back
to the queue, claiming and sending nothing.

The settings come from the environment, as a deployment gives them: the
client's from ``CAMPAIGNKIT_*``, these from ``CAMPAIGNS_*``.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import dramatiq
from dramatiq.asyncio import get_event_loop_thread
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.middleware import AsyncIO, Middleware, MiddlewareError

from campaignkit import CampaignClient
from campaignkit.bulk import UserInput
from campaignkit.ledger import PostgresLedger, WrongLedger
from campaignkit.workers import send_chunk, submit_run

BROKER_URL = os.environ.get("CAMPAIGNS_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
LEDGER_DSN = os.environ.get("CAMPAIGNS_LEDGER_DSN", "postgresql://127.0.0.1/campaigns")
QUEUE = os.environ.get("CAMPAIGNS_QUEUE", "campaigns")
# A killed worker's chunk is reported ambiguous this long after it was
# claimed: longer than any chunk's request with its retries takes.
CLAIM_TTL = float(os.environ.get("CAMPAIGNS_CLAIM_TTL", "600"))


class WorkerState(Middleware):
    """One client and one ledger per worker process, on its event loop thread."""

    def __init__(self) -> None:
        self.client: CampaignClient | None = None
        self.ledger: PostgresLedger | None = None
        # One name per process in the ledger's claims: who sent what.
        self.owner = ""

    def before_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        # Before the worker takes any message (after_worker_boot comes once
        # it has started taking them), and after the AsyncIO middleware,
        # added before this one, has started the loop.
        try:
            _run(self._open())
        except Exception as exc:
            # Dramatiq logs any other error of a middleware and boots all the
            # same: a worker that cannot open its client or ledger would fail
            # every message. Stop it instead.
            raise MiddlewareError(f"cannot open the worker's client and ledger: {exc}") from exc

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        _run(self._close())

    async def _open(self) -> None:
        ledger = PostgresLedger(LEDGER_DSN, claim_ttl=CLAIM_TTL)
        await ledger.open()
        self.ledger, self.client = ledger, CampaignClient()
        self.owner = f"{socket.gethostname()}:{os.getpid()}"

    async def _close(self) -> None:
        client, ledger = self.client, self.ledger
        self.client = self.ledger = None
        try:
            if client is not None:
                await client.aclose()
        finally:
            if ledger is not None:
                await ledger.aclose()


def _run(coroutine: Any) -> None:
    loop_thread = get_event_loop_thread()
    if loop_thread is None:
        raise RuntimeError("the AsyncIO middleware is not installed on the broker")
    loop_thread.run_coroutine(coroutine)


state = WorkerState()
broker = RabbitmqBroker(url=BROKER_URL, confirm_delivery=True)
broker.add_middleware(AsyncIO())
broker.add_middleware(state)
dramatiq.set_broker(broker)


def _retry_when(retries: int, exception: BaseException) -> bool:
    # A chunk of another ledger goes back to the queue however often (see
    # the actor); anything else, the ledger out of reach for one, up to 20 times.
    return isinstance(exception, dramatiq.Retry) or retries < 20


@dramatiq.actor(actor_name="campaigns.send_chunk", queue_name=QUEUE, retry_when=_retry_when)
async def send_campaign_chunk(run: str, chunk: str, ledger_identity: str) -> None:
    """Claim and send one chunk of ``run`` (nothing if it was taken already)."""
    if state.client is None or state.ledger is None:
        raise RuntimeError("run this actor in a dramatiq worker: its boot opens the state")
    try:
        await send_chunk(
            state.client,
            state.ledger,
            run,
            chunk,
            owner=state.owner,
            ledger_identity=ledger_identity,
        )
    except WrongLedger as wrong:
        # A chunk of another ledger (a worker given the wrong DSN): back to
        # the queue for that ledger's workers, never dropped.
        raise dramatiq.Retry(str(wrong), delay=5_000) from wrong


async def submit(poll_id: int | str, users: UserInput, **options: Any) -> str:
    """Plan ``users`` into the ledger and send one message per chunk; the
    run's name. ``options`` are :func:`campaignkit.workers.submit_run`'s
    (``run``, ``chunk_size``, ``send_window``...); call it again with the
    same ``run`` after a crash to finish, nobody twice."""

    async with PostgresLedger(LEDGER_DSN) as ledger:

        async def enqueue(run: str, chunk: str) -> None:
            # Blocks the loop until RabbitMQ confirms the message: the ledger
            # marks the chunk enqueued only then.
            send_campaign_chunk.send(run, chunk, ledger.identity)

        return await submit_run(ledger, poll_id, users, enqueue=enqueue, **options)
