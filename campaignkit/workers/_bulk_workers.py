"""BulkWorkers: one bulk send spread over taskiq workers (see :mod:`campaignkit.workers`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Final, Unpack

import attrs
from taskiq import AsyncBroker, AsyncTaskiqDecoratedTask, Context, TaskiqDepends, TaskiqEvents

from .._input.validation import raise_problems
from ..bulk import (
    BulkOptions,
    BulkOptionsDict,
    BulkReport,
    FollowingRun,
    UserInput,
    checked_options,
    follow_problems,
)
from ..client import CampaignClient
from ..errors import LedgerError
from ..ledger import IN_FLIGHT, PLANNED
from ..progress import ProgressUpdate, check_every, run_update, throttled
from ._chunks import ChunkTask, LedgerSide, LedgerSource
from ._runs import IN_PROCESS_ONLY, submit_run

TASK_NAME: Final = "campaignkit.send_chunk"


class BulkWorkers:
    """A campaignkit bulk send on a taskiq ``broker``: :meth:`submit` and
    :meth:`wait` on the producer's side, one chunk task (named ``task_name``)
    registered on the broker for the workers.

    ``ledger``: a ``postgresql://`` DSN (any number of machines) or an SQLite
    path (processes of one machine), or a function making a ledger; each
    process opens its own and closes it. A ledger object is shared and never
    closed here. ``client``: makes each worker's :class:`CampaignClient`
    (default: configured from the ``CAMPAIGNKIT_*`` variables); the options
    (``options=BulkOptions(...)`` or its fields as keywords) ``timeout`` and
    ``max_retries`` apply to each chunk's request; a run's rules and guards
    are given to :meth:`submit` (refused here). Worker-side state is
    opened on the broker's ``WORKER_STARTUP`` event and closed on
    ``WORKER_SHUTDOWN``.
    """

    def __init__(
        self,
        broker: AsyncBroker,
        ledger: LedgerSource,
        *,
        client: Callable[[], CampaignClient] = CampaignClient,
        task_name: str = TASK_NAME,
        options: BulkOptions | None = None,
        **keywords: Unpack[BulkOptionsDict],
    ) -> None:
        self.broker = broker
        self._producer = LedgerSide(ledger)
        options = BulkOptions.of(options, keywords)
        workers_own = ("timeout", "max_retries")
        options.refuse(
            [name for name in IN_PROCESS_ONLY if name not in workers_own],
            "applies to send_bulk in one process, not to the workers",
        )
        # Taken here and never applied, a run's rule would be a guard the
        # user believes holds: each run's are given to submit.
        options.refuse(
            [
                field.name
                for field in attrs.fields(BulkOptions)
                if field.init and field.name not in (*IN_PROCESS_ONLY, *workers_own)
            ],
            "is a run's option: give it to submit (kept with the run, every worker applies it)",
        )
        self._worker = ChunkTask(
            ledger, client, timeout=options.timeout, max_retries=options.max_retries
        )
        self._client = client
        self.task: AsyncTaskiqDecoratedTask[..., Awaitable[str | None]]

        # The message: (run, chunk) and the identity of the producer's ledger
        # (None in messages of releases before it).
        async def send_chunk(
            run: str,
            chunk: str,
            ledger_identity: str | None = None,
            context: Context = TaskiqDepends(),  # noqa: B008 (taskiq's way to ask for it)
        ) -> str | None:
            return await self._worker.send(run, chunk, ledger_identity, context)

        # A plain function: taskiq renames what it registers, which a bound method refuses.
        self.task = broker.register_task(send_chunk, task_name=task_name)
        broker.add_event_handler(TaskiqEvents.WORKER_STARTUP, self._worker.startup)
        broker.add_event_handler(TaskiqEvents.WORKER_SHUTDOWN, self._worker.shutdown)

    def __repr__(self) -> str:
        return f"<BulkWorkers task={self.task.task_name!r} broker={type(self.broker).__name__}>"

    # -- the workers

    @property
    def owner(self) -> str:
        """This worker's name in its claims (host, pid, a random part), once started."""
        return self._worker.owner

    async def work(self, *, concurrency: int = 4, stop: asyncio.Event | None = None) -> None:
        """Be a worker in this process (what ``campaignkit worker`` runs): take
        up to ``concurrency`` chunks at a time until ``stop`` is set, then
        finish the chunks under way and shut the broker down.

        ``taskiq worker module:broker`` does the same in worker processes of
        its own. Cancelling abandons the chunks under way: their claims
        expire and are reported ambiguous.
        """
        from taskiq.receiver import Receiver

        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise_problems([("concurrency", f"must be an int >= 1, got {concurrency!r}")])
        self.broker.is_worker_process = True
        receiver = Receiver(self.broker, max_async_tasks=concurrency)
        try:
            await receiver.listen(stop or asyncio.Event())
        finally:
            await asyncio.shield(self.broker.shutdown())

    # -- the producer

    async def __aenter__(self) -> BulkWorkers:
        await self._producer.get()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the producer's ledger (if this object opened it); idempotent."""
        await self._producer.close()

    async def submit(
        self,
        poll_id: int | str,
        users: UserInput,
        *,
        options: BulkOptions | None = None,
        **keywords: Unpack[BulkOptionsDict],
    ) -> str:
        """Plan ``users`` into the ledger and enqueue one message per chunk; the
        run's name. :func:`~campaignkit.workers.submit_run` on this broker: see it.

        A recipient listed on the suppression list while its chunk waits for a
        worker is filed suppressed by the worker's claim. With a ``canary``,
        it returns once the canary is judged (and the rest handed over if it
        held), its launches followed with a client of ``client=``."""
        ledger = await self._producer.get()

        async def enqueue(run: str, chunk: str) -> object:
            return await self.task.kiq(run, chunk, ledger_identity=ledger.identity)

        _, checked = checked_options(poll_id, users, options, keywords)
        if checked.canary is None:
            return await submit_run(ledger, poll_id, users, enqueue=enqueue, options=checked)
        async with self._client() as client:
            return await submit_run(
                ledger, poll_id, users, enqueue=enqueue, client=client, options=checked
            )

    async def progress(
        self, run: str, *, poll_interval: float = 1.0
    ) -> AsyncGenerator[ProgressUpdate]:
        """The run's :class:`~campaignkit.ProgressUpdate` every ``poll_interval``
        seconds (untimed, unthrottled: see :meth:`updates`), until it is done.

        ``counts``: its recipients per ledger state, plus ``invalid`` and
        ``duplicate`` inputs; ``total``: the inputs, once the producer has
        read them all; ``funnel``: what became of the accepted ones, as far
        as the ledger knows; ``finished`` once every planned recipient has
        been settled or expired, or once the run is paused with none in
        flight (its planned recipients wait for its resumption). Each
        reading first reports the recipients of expired claims (workers that
        died mid-chunk) ambiguous.
        """
        ledger = await self._producer.get()
        while True:
            await ledger.expire(run)
            info = await ledger.run_info(run)
            if info is None:
                raise LedgerError(f"no run named {run!r} in {ledger!r}")
            counts = await ledger.counts(run)
            waits = counts[PLANNED] and info.paused is None
            done = info.input_done and not waits and not counts[IN_FLIGHT]
            yield run_update(counts, info.total, done, await ledger.funnel(run))
            if done:
                return
            await asyncio.sleep(poll_interval)

    def updates(
        self, run: str, *, every: float = 2.0, poll_interval: float = 1.0
    ) -> AsyncGenerator[ProgressUpdate]:
        """:meth:`progress` as throttled :class:`~campaignkit.ProgressUpdate`
        snapshots (as ``CampaignTracker.updates``; ``sent``: accepted), each
        with the run's ``funnel``."""
        readings = self.progress(run, poll_interval=poll_interval)
        return throttled(readings, check_every(every), time.monotonic, asyncio.sleep)

    async def counts(self, run: str) -> dict[str, int]:
        """The run's recipients per state now (see :meth:`progress`)."""
        return await (await self._producer.get()).counts(run)

    async def wait(
        self,
        run: str,
        *,
        poll_interval: float = 1.0,
        timeout: float | None = None,
        follow: bool = False,
        follow_timeout: float | None = None,
    ) -> BulkReport:
        """The run's :class:`BulkReport` once it is done, or paused (the
        builtin ``TimeoutError`` after ``timeout`` seconds).

        ``follow``: meanwhile, follow each launch the workers accepted as
        soon as it is (with a client of ``client=``), writing its
        recipients' outcomes into the ledger, so that the run's ``breaker``
        pauses it while the workers still send; once the run is done, follow
        them until settled, at most ``follow_timeout`` seconds more (as
        ``send_bulk(follow=True)``)."""
        raise_problems(follow_problems(follow, follow_timeout))
        ledger = await self._producer.get()
        async with asyncio.timeout(timeout):
            if not follow:
                async for _ in self.progress(run, poll_interval=poll_interval):
                    pass
            else:
                async with (
                    self._client() as client,
                    FollowingRun(client, ledger, run, follow_timeout=follow_timeout) as following,
                ):
                    async for _ in self.progress(run, poll_interval=poll_interval):
                        await following.feed()
        return await ledger.report(run)
