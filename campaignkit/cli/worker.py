"""``worker``: send the chunks of bulk runs from a taskiq broker, one line
per chunk on stderr."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator

from .._redaction import redact
from ..ledger import DEFAULT_CLAIM_TTL
from .argtypes import positive_float, positive_int
from .context import AddCommand, Ctx, ExitStatus, require_workers
from .runs import open_ledger


def register(add: AddCommand) -> None:
    p = add(
        "worker",
        "send chunks of bulk runs from a taskiq broker (extra 'workers')",
        "Take chunks of bulk runs from the broker's queue, claim each in the ledger and send "
        "it with the client's send rules, until SIGINT/SIGTERM (the chunks under way are "
        "finished first). Start as many as you like, on any machine that reaches the broker "
        "and the ledger. Producers use campaignkit.workers.BulkWorkers (README, 'Bulk sends "
        "across workers').",
    )
    p.add_argument(
        "--broker",
        required=True,
        help="redis://HOST:PORT/DB (a Redis streams broker), or module:attribute naming a "
        "taskiq broker object of yours (RabbitMQ, NATS, ...)",
    )
    p.add_argument(
        "--journal",
        required=True,
        help="the runs' ledger: a postgresql:// DSN (or an SQLite file, one machine only); "
        "it must exist (never created here). Chunks of another ledger are left on the "
        "queue for its workers, with a warning",
    )
    p.add_argument("--concurrency", type=positive_int, default=4, help="chunks at a time (4)")
    p.add_argument("--queue", default="campaignkit", help="Redis stream name (campaignkit)")
    p.add_argument(
        "--claim-ttl",
        type=positive_float,
        default=DEFAULT_CLAIM_TTL,
        help="seconds after which a claim of a dead worker is reported ambiguous "
        f"({DEFAULT_CLAIM_TTL:g}); longer than any chunk's request can last",
    )
    p.add_argument(
        "--redeliver-after",
        type=positive_float,
        default=60.0,
        help="Redis: seconds before a message left unacknowledged by a dead worker goes "
        "to another (60); early is safe, a chunk is never claimed twice",
    )
    p.set_defaults(func=cmd_worker, needs_client=False)


class _Lines(logging.Formatter):
    """One line per record (the traceback too with ``--debug``), the API key redacted."""

    def __init__(self, *, tracebacks: bool) -> None:
        super().__init__("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S")
        self._tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if self._tracebacks:
            return redact(super().format(record))
        return redact(f"{self.formatTime(record, self.datefmt)} {record.getMessage()}")


_TASKIQ_REPEATS = (
    # Every failed task, with its traceback: the chunk's own ERROR line says it.
    "Exception found while executing function.",
    # A chunk of another ledger given back to the queue: the WARNING line says it.
    "Task %s with id %s skipped setting result.",
)


def _repeats_our_line(record: logging.LogRecord) -> bool:
    return record.msg not in _TASKIQ_REPEATS


@contextlib.contextmanager
def _worker_logging(ctx: Ctx) -> Iterator[None]:
    """The workers' and ledger's lines on stderr: a line per chunk and per
    reconnection (warnings only with --quiet)."""
    handler = logging.StreamHandler(ctx.err)
    handler.setFormatter(_Lines(tracebacks=ctx.args.debug))
    handler.addFilter(_repeats_our_line)
    level = logging.WARNING if ctx.args.quiet else logging.INFO
    loggers = [logging.getLogger(name) for name in ("campaignkit", "taskiq")]
    saved = [(logger.level, logger.propagate) for logger in loggers]
    for logger, logger_level in zip(loggers, (level, logging.WARNING), strict=True):
        logger.addHandler(handler)
        logger.setLevel(logger_level)
        logger.propagate = False
    try:
        yield
    finally:
        for logger, (old_level, propagate) in zip(loggers, saved, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(old_level)
            logger.propagate = propagate


async def cmd_worker(ctx: Ctx) -> ExitStatus:
    require_workers("worker")
    from taskiq import TaskiqEvents, TaskiqState

    from ..workers import BulkWorkers, broker_from

    a = ctx.args
    client = ctx.client()  # configuration errors now, not at the first chunk
    broker = broker_from(a.broker, queue=a.queue, redeliver_after=a.redeliver_after)
    # Opened before the broker: a missing ledger is an error naming it, never
    # an empty one whose worker would take the run's chunks.
    async with open_ledger(a.journal, claim_ttl=a.claim_ttl, existing=True) as ledger:
        bulk = BulkWorkers(broker, ledger, client=lambda: client)

        def ready(state: TaskiqState) -> None:
            ctx.note(
                f"campaignkit worker {bulk.owner} ready: {type(broker).__name__}"
                f"{f' queue {a.queue}' if '://' in a.broker else ''}, ledger {ledger!r} "
                f"(ledger {ledger.identity}), concurrency {a.concurrency} "
                "(SIGINT/SIGTERM: stop after the chunks under way)"
            )

        broker.add_event_handler(TaskiqEvents.WORKER_STARTUP, ready)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            with _worker_logging(ctx):
                await bulk.work(concurrency=a.concurrency, stop=stop)
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
    ctx.note("campaignkit worker stopped")
    return ExitStatus.OK
