"""``worker`` (send the chunks of bulk runs from a taskiq broker) and ``runs``
(a delivery ledger's runs, one run's counts, its users to retry)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._funnel import Funnel
from .._redaction import redact
from ..bulk import DEFAULT_FOLLOW_CONCURRENCY
from ..ledger import (
    DEFAULT_CLAIM_TTL,
    STATES,
    Ledger,
    RunInfo,
    ledger_from,
)
from .argtypes import positive_float, positive_int
from .context import AddCommand, Ctx, ExitStatus, UsageError, require_workers
from .following import add_follow_timeout, check_follow_timeout, follow_first, note_unconfirmed
from .output import funnel_table, table
from .run_export import export_run, failure_status_list


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

    p = add(
        "runs",
        "the runs of a delivery ledger, or one run's counts",
        "List the runs of the ledger, or show RUN's recipients per state (expired claims, "
        "of senders that died, are first reported ambiguous) and its funnel (planned, "
        "accepted, delivered, read, replied; failures by status). --follow first tracks RUN's "
        "accepted launches until they settle, writing each person's outcome (run it again "
        "later: it resumes, and learns which SUCCESS became DELIVERED). --export writes RUN's "
        "rejected, ambiguous or suppressed users as a CSV file that `send` reads, for a "
        "deliberate retry; --export-status the users whose deployments ended in these failure "
        "statuses, for a follow-up run (send it under a new --run).",
    )
    p.add_argument("run", nargs="?", help="a run's name")
    p.add_argument(
        "--journal",
        required=True,
        help="the ledger: an SQLite file or a postgresql:// DSN; it must exist (exit 7)",
    )
    exported = ["rejected", "ambiguous", "suppressed", "deferred"]
    p.add_argument("--export", choices=exported, help="write these users as CSV")
    p.add_argument(
        "--export-status",
        metavar="STATUS",
        type=failure_status_list,
        action="extend",
        help="write the users whose deployment ended in these failure statuses as CSV "
        "(comma-separated, or repeated; e.g. FAILURE_BY_UNABLE_TO_CONTACT; needs the run's "
        "outcomes: --follow)",
    )
    p.add_argument(
        "-o", "--output", type=Path, help="CSV file for --export/--export-status (default: stdout)"
    )
    p.add_argument(
        "--follow",
        action="store_true",
        help="first track RUN's accepted launches until they settle, writing outcomes",
    )
    p.add_argument(
        "--follow-concurrency",
        type=positive_int,
        default=DEFAULT_FOLLOW_CONCURRENCY,
        help=f"launches tracked at once with --follow ({DEFAULT_FOLLOW_CONCURRENCY})",
    )
    add_follow_timeout(p)
    p.set_defaults(func=cmd_runs, needs_client=False)


def open_ledger(journal: str, *, claim_ttl: float | None = None, existing: bool = False) -> Ledger:
    """The ledger ``--journal`` names (an SQLite file or a ``postgresql://`` DSN);
    ``existing``: opening it refuses a ledger that does not exist
    (:class:`~campaignkit.ledger.LedgerNotFound`, exit 7), creating nothing:
    a command that reads or resumes a run must never start an empty ledger."""
    ledger = ledger_from(journal, create=not existing)
    if claim_ttl is not None:
        ledger.claim_ttl = claim_ttl
    return ledger


def say_if_new(ctx: Ctx, ledger: Ledger) -> None:
    """The first line of a command that has just created its ledger, even with
    --quiet: a resumed run whose --journal was mistyped shows here."""
    if ledger.is_new:
        ctx.err.write(
            redact(
                f"campaignkit: new ledger created: {ledger!r} did not exist (ledger "
                f"{ledger.identity}); resuming a run? then this is not its --journal\n"
            )
        )
        ctx.err.flush()


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


def _created(info: RunInfo) -> str:
    return datetime.fromtimestamp(info.created, UTC).isoformat(timespec="seconds")


def _run_json(
    info: RunInfo, counts: dict[str, int], funnel: Funnel | None = None
) -> dict[str, Any]:
    shown = {
        "run": info.run,
        "poll_id": info.poll,
        "created": _created(info),
        "input_done": info.input_done,
        "total": info.total,
        "stopped": info.stopped,
        "counts": counts,
    }
    return shown if funnel is None else {**shown, "funnel": funnel.to_json()}


async def cmd_runs(ctx: Ctx) -> ExitStatus:
    a = ctx.args
    for option, given in (("--export", a.export), ("--export-status", a.export_status)):
        if given and not a.run:
            raise UsageError(f"{option} needs a RUN")
    if a.follow and not a.run:
        raise UsageError("--follow needs a RUN")
    check_follow_timeout(a)
    if a.export and a.export_status:
        raise UsageError("give --export or --export-status, not both")
    if a.output and not (a.export or a.export_status):
        raise UsageError("-o/--output needs --export or --export-status")
    async with open_ledger(a.journal, existing=True) as ledger:
        if not a.run:
            await list_runs(ctx, ledger)
            return ExitStatus.OK
        info = await ledger.run_info(a.run)
        if info is None:
            raise UsageError(f"no run named {a.run!r} in {ledger!r}")
        await ledger.expire(a.run)
        if a.follow:
            await follow_first(ctx, ledger)
        if a.export:
            await export_run(
                ctx, lambda: ledger.records(a.run, [a.export]), a.run, a.export, a.output
            )
            return ExitStatus.OK
        if a.export_status:
            await export_run(
                ctx,
                lambda: ledger.follow_up_records(a.run, a.export_status),
                a.run,
                "|".join(a.export_status),
                a.output,
            )
            return ExitStatus.OK
        counts = await ledger.counts(a.run)
        funnel = await ledger.funnel(a.run)
        if ctx.json:
            ctx.emit(_run_json(info, counts, funnel))
        else:
            state = "input read" if info.input_done else "input still being read"
            ctx.print(
                f"run {info.run}: poll {info.poll}, created {_created(info)}, {state}"
                + (f" ({info.total} inputs)" if info.total is not None else "")
            )
            if info.stopped is not None:
                ctx.print(f"ended by a fatal answer: {info.stopped}")
            ctx.print(table(list(counts.items()), ["state", "users"]))
            ctx.print("")
            ctx.print(funnel_table(funnel))
            if a.follow:
                note_unconfirmed(ctx, funnel, a.run)
    return ExitStatus.OK


async def list_runs(ctx: Ctx, ledger: Ledger) -> None:
    runs = [(info, await ledger.counts(info.run)) for info in await ledger.runs()]
    if ctx.json:
        ctx.emit([_run_json(i, counts, await ledger.funnel(i.run)) for i, counts in runs])
        return
    rows = [
        (
            info.run,
            info.poll,
            _created(info),
            "done" if info.input_done else "reading",
            *counts.values(),
        )
        for info, counts in runs
    ]
    ctx.print(table(rows, ["run", "poll", "created", "input", *(runs[0][1] if runs else STATES)]))
