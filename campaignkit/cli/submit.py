"""``submit``: stream a users file into a bulk run for the workers
(``campaignkit worker``), and say how to watch it."""

from __future__ import annotations

import attrs

from ..bulk import DEFAULT_CHUNK_SIZE
from . import sending_line
from .argtypes import positive_int
from .context import AddCommand, Ctx, ExitStatus, require_workers
from .input import add_users_arguments, bulk_input
from .output import command_line, table
from .runs import open_ledger, paused_words, say_if_new


def register(add: AddCommand) -> None:
    p = add(
        "submit",
        "stream a users file into a bulk run for the workers (extra 'workers')",
        "Plan the users of FILE ('-' for stdin; CSV or JSON as `send` reads them) into a run "
        "of the ledger, chunk by chunk, and enqueue one message per chunk on the broker for "
        "`campaignkit worker` processes to send. Prints the run's name and how to watch it. "
        "Run it again with the same --run after a crash: only who the run does not hold yet "
        "is planned, and chunks never enqueued are enqueued again. The ledger must exist "
        "(a resumed run's ledger is never created anew): --create makes a new one for a "
        "first run, and says so on the first line. Each chunk message names the ledger: "
        "workers on another ledger leave it to the right ones. With --canary, only the "
        "canary's chunks are enqueued first: it waits for the workers to send them, follows "
        "them (with the API key) and enqueues the rest only if they hold; otherwise the run "
        "is paused, says how to resume it (then submit again to hand the rest over) and exits 6.",
    )
    add_users_arguments(p)
    p.add_argument(
        "--broker",
        required=True,
        help="the workers' broker: redis://HOST:PORT/DB, or module:attribute of a taskiq broker",
    )
    p.add_argument(
        "--journal",
        required=True,
        help="the workers' ledger: a postgresql:// DSN (or an SQLite file, one machine only)",
    )
    p.add_argument(
        "--create",
        action="store_true",
        help="create the ledger if it does not exist (a first run); without it a missing "
        "ledger is an error (exit 7)",
    )
    p.add_argument("--run", help="the run's name in the ledger (default: poll-POLL_ID)")
    p.add_argument("--chunk-size", type=positive_int, default=DEFAULT_CHUNK_SIZE)
    p.add_argument("--queue", default="campaignkit", help="Redis stream name (campaignkit)")
    p.add_argument(
        "--retry-rejected", action="store_true", help="plan again the run's rejected users"
    )
    p.add_argument(
        "--ignore-suppression",
        action="store_true",
        help="send to numbers on the ledger's suppression list too (this run only)",
    )
    sending_line.add_options(p)
    p.set_defaults(func=cmd_submit, needs_client=False)


async def cmd_submit(ctx: Ctx) -> ExitStatus:
    require_workers("submit")
    from ..workers import BulkWorkers, broker_from

    a = ctx.args
    rules = sending_line.options(a)
    users, _ = bulk_input(a.file, a.format)
    broker = broker_from(a.broker, queue=a.queue)
    async with open_ledger(a.journal, existing=not a.create) as ledger:
        say_if_new(ctx, ledger)
        await broker.startup()
        try:
            # A client only for a canary, which the submit follows.
            async with BulkWorkers(broker, ledger, client=ctx.client) as bulk:
                run = await bulk.submit(
                    a.poll_id,
                    users,
                    run=a.run,
                    chunk_size=a.chunk_size,
                    retry_rejected=a.retry_rejected,
                    ignore_suppression=a.ignore_suppression,
                    **rules,
                )
                counts = await bulk.counts(run)
            info = await ledger.run_info(run)
        finally:
            await broker.shutdown()
    paused = None if info is None else info.paused
    # A paused run (a canary that failed) is sent in part: the rest waits for its resumption.
    status = ExitStatus.OK if paused is None else ExitStatus.PARTIAL
    watch = command_line("runs", run, "--journal", a.journal)
    if ctx.json:
        pause = None if paused is None else attrs.asdict(paused)
        ctx.emit({"run": run, "counts": counts, "watch": watch, "paused": pause})
        return status
    ctx.print(f"run {run}: submitted for the workers")
    ctx.print(table([(state, n) for state, n in counts.items() if n], ["state", "recipients"]))
    if info is not None and paused is not None:
        ctx.note(paused_words(info, a.journal))
    ctx.note(
        f"watch it with:\n  {watch}\n"
        f"or on the dashboard:\n  {command_line('dashboard', '--journal', a.journal)}"
    )
    return status
