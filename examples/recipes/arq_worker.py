"""A campaignkit bulk send on arq with Redis (``pip install 'campaignkit[arq]'``).

Workers::

    arq arq_worker.WorkerSettings

The producer, anywhere that imports this module::

    run = asyncio.run(submit(poll_id, users_from_csv("users.csv"), run="spring"))

then follow it with ``campaignkit runs spring --journal $CAMPAIGNS_LEDGER_DSN``.

arq is asyncio already: each worker process opens one CampaignClient and one
PostgresLedger in ``on_startup`` and closes them in ``on_shutdown``; its jobs
(up to ``max_jobs`` at once) share them.

arq has no acknowledgement: a job stays in its queue until it has finished,
and a job whose worker died is run again by another worker once its
"in progress" mark expires, ``job_timeout`` + 10 s after it started. Running
a chunk twice is safe: the ledger's claim is atomic, and the second run finds
nothing left to claim.

A message is ``(run, chunk, ledger identity)``: the users stay in the ledger,
and a worker given another ledger than the producer's claims and sends
nothing. arq has no way to hand a job to another worker: the job is retried
later on whichever worker takes it, within ``max_tries``; if the wrong worker
keeps taking it, the chunk stays planned, and ``campaignkit runs`` shows the
run stalled with the command that hands its planned recipients over again.
(Celery and Dramatiq requeue such a message for the right worker.)

The settings come from the environment, as a deployment gives them: the
client's from ``CAMPAIGNKIT_*``, these from ``CAMPAIGNS_*``.
"""

from __future__ import annotations

import os
import random
import socket
from typing import Any

from arq import Retry, create_pool
from arq.connections import RedisSettings

from campaignkit import CampaignClient
from campaignkit.bulk import UserInput
from campaignkit.errors import LedgerError
from campaignkit.ledger import PostgresLedger, WrongLedger
from campaignkit.workers import send_chunk, submit_run

BROKER_URL = os.environ.get("CAMPAIGNS_BROKER_URL", "redis://127.0.0.1:6379/0")
LEDGER_DSN = os.environ.get("CAMPAIGNS_LEDGER_DSN", "postgresql://127.0.0.1/campaigns")
QUEUE = os.environ.get("CAMPAIGNS_QUEUE", "campaigns")
# arq cancels a chunk's job after JOB_TIMEOUT (its claim is then settled
# ambiguous: the request may have reached the service); a killed worker's
# chunk is reported ambiguous CLAIM_TTL after it was claimed. Keep the claim
# longer than the job, and the job longer than a chunk's request with its retries.
JOB_TIMEOUT = float(os.environ.get("CAMPAIGNS_JOB_TIMEOUT", "300"))
CLAIM_TTL = float(os.environ.get("CAMPAIGNS_CLAIM_TTL", "600"))


async def send_campaign_chunk(
    ctx: dict[str, Any], run: str, chunk: str, ledger_identity: str
) -> str | None:
    """Claim and send one chunk of ``run``; its outcome, or None if it was taken already."""
    try:
        result = await send_chunk(
            ctx["client"],
            ctx["ledger"],
            run,
            chunk,
            owner=ctx["owner"],
            ledger_identity=ledger_identity,
        )
    except WrongLedger as wrong:
        # A chunk of another ledger (a worker given the wrong DSN): back to
        # the queue for that ledger's workers, within max_tries (arq counts
        # these too). At a random time: deferred by a fixed delay, it falls
        # due just as this worker polls again, and this worker takes it again.
        raise Retry(defer=random.uniform(1, 5)) from wrong
    except LedgerError as lost:
        # The ledger out of reach for longer than it waits: try again later
        # (never anyone twice), or the chunk stays planned.
        raise Retry(defer=min(300, 5 * ctx["job_try"])) from lost
    return None if result is None else result.outcome


async def startup(ctx: dict[str, Any]) -> None:
    ledger = PostgresLedger(LEDGER_DSN, claim_ttl=CLAIM_TTL)
    await ledger.open()
    ctx["ledger"], ctx["client"] = ledger, CampaignClient()
    # One name per process in the ledger's claims: who sent what.
    ctx["owner"] = f"{socket.gethostname()}:{os.getpid()}"


async def shutdown(ctx: dict[str, Any]) -> None:
    try:
        if "client" in ctx:
            await ctx["client"].aclose()
    finally:
        if "ledger" in ctx:
            await ctx["ledger"].aclose()


class WorkerSettings:
    functions = (send_campaign_chunk,)
    on_startup = startup
    on_shutdown = shutdown
    redis_settings = RedisSettings.from_dsn(BROKER_URL)
    queue_name = QUEUE
    job_timeout = JOB_TIMEOUT
    max_tries = 20
    keep_result = 0  # each chunk's outcome is in the ledger


async def submit(poll_id: int | str, users: UserInput, **options: Any) -> str:
    """Plan ``users`` into the ledger and enqueue one job per chunk; the
    run's name. ``options`` are :func:`campaignkit.workers.submit_run`'s
    (``run``, ``chunk_size``, ``send_window``...); call it again with the
    same ``run`` after a crash to finish, nobody twice."""
    redis = await create_pool(WorkerSettings.redis_settings, default_queue_name=QUEUE)

    try:
        async with PostgresLedger(LEDGER_DSN) as ledger:

            async def enqueue(run: str, chunk: str) -> None:
                # Named after its chunk: arq keeps one job of a name queued at a time.
                await redis.enqueue_job(
                    "send_campaign_chunk", run, chunk, ledger.identity, _job_id=f"{run}/{chunk}"
                )

            return await submit_run(ledger, poll_id, users, enqueue=enqueue, **options)
    finally:
        await redis.aclose()
