"""BulkWorkers: one bulk send spread over taskiq workers (see :mod:`campaignkit.workers`)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Sequence,
)
from typing import Any, Final

import attrs
from taskiq import AsyncBroker, AsyncTaskiqDecoratedTask, TaskiqEvents

from .._input.validation import raise_problems
from ..bulk import (
    DEFAULT_CHUNK_SIZE,
    BulkReport,
    PlannedChunk,
    Planner,
    SendWindow,
    TzFor,
    UserInput,
    bulk_problems,
    default_run,
    rules_problems,
    zone_preparer,
)
from ..client import CampaignClient
from ..errors import LedgerError
from ..ledger import IN_FLIGHT, PLANNED, Ledger
from ..progress import ProgressUpdate, check_every, run_update, throttled
from ._chunks import ChunkSender, LedgerSide, LedgerSource

TASK_NAME: Final = "campaignkit.send_chunk"


@attrs.frozen
class RunProgress:
    """A run's recipients per ledger state (plus ``invalid``/``duplicate`` inputs);
    ``total`` is the number of inputs once the producer has read them all;
    ``done`` once every planned recipient has been settled or expired."""

    run: str
    counts: dict[str, int]
    total: int | None
    done: bool


class BulkWorkers:
    """A campaignkit bulk send on a taskiq ``broker``: :meth:`submit` and
    :meth:`wait` on the producer's side, one chunk task (named ``task_name``)
    registered on the broker for the workers.

    ``ledger``: a ``postgresql://`` DSN (any number of machines) or an SQLite
    path (processes of one machine), or a function making a ledger; each
    process opens its own and closes it. A ledger object is shared and never
    closed here. ``client``: makes each worker's :class:`CampaignClient`
    (default: configured from the ``CAMPAIGNKIT_*`` variables); ``timeout``
    and ``max_retries`` apply to each chunk's request. Worker-side state is
    opened on the broker's ``WORKER_STARTUP`` event and closed on
    ``WORKER_SHUTDOWN``.
    """

    def __init__(
        self,
        broker: AsyncBroker,
        ledger: LedgerSource,
        *,
        client: Callable[[], CampaignClient] = CampaignClient,
        timeout: float | None = None,
        max_retries: int | None = None,
        task_name: str = TASK_NAME,
    ) -> None:
        self.broker = broker
        self._producer = LedgerSide(ledger)
        self._worker = ChunkSender(ledger, client, timeout=timeout, max_retries=max_retries)
        self.task: AsyncTaskiqDecoratedTask[[str, str], Awaitable[str | None]]

        async def send_chunk(run: str, chunk: str) -> str | None:
            return await self._worker.send(run, chunk)

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
        run: str | None = None,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        retry_rejected: bool = False,
        ignore_suppression: bool = False,
        send_window: SendWindow | None = None,
        daily_limit: int | None = None,
        lines: Sequence[str] | None = None,
        tz_for: TzFor | None = None,
    ) -> str:
        """Plan ``users`` into the ledger and enqueue one message per chunk; the run's name.

        Call it again with the same ``run`` after a crash (with the same
        input, or another): chunks planned but perhaps never enqueued are
        enqueued again, and only recipients the run does not hold yet (and
        rejected ones with ``retry_rejected``) are planned. A recipient whose
        phone is on the ledger's suppression list when it is planned is filed
        suppressed, never sent, unless ``ignore_suppression`` (this call
        only); one listed while its chunk waits for a worker is filed
        suppressed by the worker's claim. Returns once the
        whole input is planned; the workers may still be sending. A bad
        ``poll_id`` or ``chunk_size`` raises ``ValidationError`` first.

        ``send_window``, ``daily_limit``, ``lines`` and ``tz_for`` are those of
        ``send_bulk``: stored with the run, the workers apply them.
        """
        segment, problems = bulk_problems(poll_id, users, chunk_size=chunk_size, run=run)
        rules, rule_problems = rules_problems(send_window, daily_limit, lines, tz_for)
        raise_problems(problems + rule_problems)
        ledger = await self._producer.get()
        run = run or default_run(segment)
        # Chunk names are new to each producer: a re-read input never joins an older chunk.
        input_pass = uuid.uuid4().hex[:8]
        prefix = f"{input_pass}-"
        await ledger.start_run(run, segment, input_pass=input_pass)
        await ledger.save_run_options(run, rules.options())
        for chunk in await ledger.unenqueued_chunks(run):
            await self._enqueue(ledger, run, chunk)
        planner = Planner(chunk_size, prepare=zone_preparer(rules, tz_for))

        async def plan(planned: PlannedChunk | None) -> None:
            await ledger.skip(run, planner.drain_skipped())
            if planned is None:
                return
            chunk = f"{prefix}{planned.index:06d}"
            held = await ledger.plan(
                run,
                chunk,
                planned.recipients,
                retry_rejected=retry_rejected,
                ignore_suppression=ignore_suppression,
            )
            if len(held) < len(planned.recipients):
                await self._enqueue(ledger, run, chunk)

        async for item in _items(users):
            if (planned := planner.take(item)) is not None:
                await plan(planned)
        await plan(planner.flush())
        await ledger.finish_input(run, planner.total)
        return run

    async def _enqueue(self, ledger: Ledger, run: str, chunk: str) -> None:
        await self.task.kiq(run, chunk)
        await ledger.mark_enqueued(run, chunk)

    async def progress(self, run: str, *, poll_interval: float = 1.0) -> AsyncIterator[RunProgress]:
        """The run's counts every ``poll_interval`` seconds, until it is done.

        Each reading first reports the recipients of expired claims (workers
        that died mid-chunk) ambiguous.
        """
        ledger = await self._producer.get()
        while True:
            await ledger.expire(run)
            info = await ledger.run_info(run)
            if info is None:
                raise LedgerError(f"no run named {run!r} in {ledger!r}")
            counts = await ledger.counts(run)
            done = info.input_done and not counts[PLANNED] and not counts[IN_FLIGHT]
            yield RunProgress(run, counts, info.total, done)
            if done:
                return
            await asyncio.sleep(poll_interval)

    def updates(
        self, run: str, *, every: float = 2.0, poll_interval: float = 1.0
    ) -> AsyncGenerator[ProgressUpdate]:
        """:meth:`progress` as throttled :class:`~campaignkit.ProgressUpdate`
        snapshots (as ``CampaignTracker.updates``; ``sent``: accepted), each
        with the run's ``funnel``."""

        async def readings() -> AsyncGenerator[ProgressUpdate]:
            ledger = await self._producer.get()
            async for p in self.progress(run, poll_interval=poll_interval):
                yield run_update(p.counts, p.total, p.done, await ledger.funnel(run))

        return throttled(readings(), check_every(every), time.monotonic, asyncio.sleep)

    async def counts(self, run: str) -> dict[str, int]:
        """The run's recipients per state now (see :meth:`progress`)."""
        return await (await self._producer.get()).counts(run)

    async def wait(
        self, run: str, *, poll_interval: float = 1.0, timeout: float | None = None
    ) -> BulkReport:
        """The run's :class:`BulkReport` once it is done (the builtin
        ``TimeoutError`` after ``timeout`` seconds)."""
        async with asyncio.timeout(timeout):
            async for _ in self.progress(run, poll_interval=poll_interval):
                pass
        return await (await self._producer.get()).report(run)


async def _items(users: UserInput) -> AsyncIterator[Any]:
    if isinstance(users, AsyncIterable):
        async for item in users:
            yield item
    else:
        for item in users:
            yield item
