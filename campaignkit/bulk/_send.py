"""``send_bulk``: one process streaming users to a poll in chunks."""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from .._input.users import InvalidInput
from .._input.validation import raise_problems
from .._report import BulkReport
from ..ledger import Ledger, MemoryLedger, ledger_from
from ..models import User
from ..progress import ProgressUpdate
from ._engine import BulkSend
from ._follow import follow_sent, follow_timeout_problems
from ._options import bulk_problems
from ._rules import TzFor, rules_problems, zone_deferral, zone_preparer
from ._seam import BulkClient
from ._stopping import DEFAULT_INTERRUPT_GRACE
from ._windows import SendWindow

DEFAULT_CHUNK_SIZE: Final = 1000
"""Users per request. The spec states no maximum users per campaign request;
1000 keeps a body near 100 KB and a lost chunk small."""


UserInput: TypeAlias = (
    Iterable[User | Mapping[str, Any] | InvalidInput]
    | AsyncIterable[User | Mapping[str, Any] | InvalidInput]
)
"""What ``send_bulk`` reads: Users, wire-shaped dicts or :class:`InvalidInput`."""
JournalPath: TypeAlias = "str | os.PathLike[str] | Ledger"
ProgressCallback: TypeAlias = Callable[[ProgressUpdate], Awaitable[None] | None]


def default_run(poll_id: str | int) -> str:
    """The run a ledger files a poll's sends under when no ``run=`` names one."""
    return f"poll-{poll_id}"


async def send_bulk(
    client: BulkClient,
    poll_id: str | int,
    users: UserInput,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    concurrency: int = 4,
    rate_limit: float | None = None,
    journal: JournalPath | None = None,
    run: str | None = None,
    retry_rejected: bool = False,
    ignore_suppression: bool = False,
    on_progress: ProgressCallback | None = None,
    keep_accepted_users: bool = False,
    timeout: float | None = None,
    max_retries: int | None = None,
    interrupt_grace: float = DEFAULT_INTERRUPT_GRACE,
    send_window: SendWindow | None = None,
    daily_limit: int | None = None,
    lines: Sequence[str] | None = None,
    tz_for: TzFor | None = None,
    default_tz: str | None = None,
    follow: bool = False,
    follow_timeout: float | None = None,
) -> BulkReport:
    """Send ``users`` to ``poll_id`` in chunks; see :mod:`campaignkit.bulk`.

    ``users``: any iterable or async iterable of :class:`User` or wire-shaped
    dicts (``cellphone``, ``country_code``, ``user_session_keys`` as a list of
    ``{key, value}`` or a mapping, ``deployment_eta``), read lazily.
    ``rate_limit``: at most that many chunk requests started per second.
    ``journal``: a delivery ledger (an SQLite path, a ``postgresql://`` DSN or
    a ledger object) filing every recipient under ``run`` (default
    ``poll-<poll_id>``): a rerun never sends again a recipient the ledger holds
    as in flight, accepted or ambiguous, whatever the input order or chunk
    size; rejected ones go again only with ``retry_rejected``. A ledger object
    is opened if it is not, and left to its owner to close. A user whose
    phone is on the ledger's suppression list is not sent (the report's
    ``suppressed``, with the reason) unless ``ignore_suppression`` (this
    call only); a rerun after a number left the list sends it.
    ``on_progress`` receives a :class:`~campaignkit.ProgressUpdate` at most
    every 0.1 s and once at the end (``finished``; an exception in it is
    logged, not raised): the inputs read so far by ledger state (``counts``:
    ``planned`` (read, not sent yet), ``in_flight``, ``accepted``,
    ``rejected``, ``ambiguous``, ``deferred``, ``suppressed``, ``invalid``,
    ``duplicate``), as
    ``BulkWorkers.updates`` and the dashboard show a run.

    Interrupted (the task cancelled, e.g. by Ctrl-C under ``asyncio.run``):
    no new request starts; the requests under way get ``interrupt_grace``
    seconds to be answered and are settled from their answers, those still
    unanswered then are settled ambiguous, a last ``on_progress`` call shows
    where the run stands, and the cancellation goes on. Cancelled again
    meanwhile, it stops at once. The users read and not sent are left for a
    rerun of the same run to send (with a durable ``journal``).
    ``follow``: once sent, track every accepted launch until it settles
    (:data:`DEFAULT_FOLLOW_CONCURRENCY` at a time) and write each
    recipient's outcome into the ledger before returning (see
    :func:`follow_run`); a launch that cannot be followed is logged (a
    warning of ``campaignkit.bulk``), and the report returned all the same.
    ``follow_timeout``: follow at most that many seconds (None: until every
    accepted launch settles), then stop and return the report: what was
    read is written, the launches left are logged, and ``follow_run`` (or
    ``campaignkit runs RUN --follow``) resumes with them.
    The report's ``funnel`` is read from the ledger at the end either way.

    Protecting the sending line (kept with the run, so the workers apply them
    too): ``send_window`` sends each recipient outside it with a
    ``deployment_eta`` at its next opening in their time zone (their ``tz``
    session variable, e.g. a CSV ``tz`` column, an empty one meaning none;
    ``tz_for(user)`` when it gives one; else every zone of their number, the
    window held in all of them at once). A number with no zone known, or
    whose zones share no moment of the window, is never timed by guess: it
    is ``deferred`` (reason ``zone unknown``; a rerun sends it once it has a
    ``tz``), or timed in ``default_tz`` (an IANA name) when given. The
    report's ``deferred_reasons`` counts each reason. ``daily_limit`` caps the unique recipients
    claimed per rolling 24 h over every run of the ledger (the rest are
    ``deferred``: a rerun sends them once the budget allows); ``lines`` (the
    sending numbers, country code included, digits only) spreads new people
    round robin through ``deployment_squad``, each person kept on their line.

    Raises :class:`ValidationError` for a bad ``poll_id`` or option before
    anything is sent; per-user problems and request failures go in the report.
    """
    segment, problems = bulk_problems(
        poll_id,
        users,
        chunk_size=chunk_size,
        concurrency=concurrency,
        rate_limit=rate_limit,
        run=run,
        interrupt_grace=interrupt_grace,
    )
    rules, rule_problems = rules_problems(send_window, daily_limit, lines, tz_for, default_tz)
    problems += rule_problems
    if journal is None and (run is not None or retry_rejected):
        problems.append(("journal", "run= and retry_rejected= need a journal (a ledger)"))
    if not isinstance(follow, bool):
        problems.append(("follow", f"must be True or False, got {follow!r}"))
    problems += follow_timeout_problems(follow_timeout)
    raise_problems(problems)
    # Without a journal, the same pipeline runs over a ledger in memory, whose
    # index of the run's phones is also the planner's dedupe set.
    memory: MemoryLedger | None = None
    if journal is None:
        ledger: Ledger = (memory := MemoryLedger())
    else:
        ledger = ledger_from(journal)
    owned = ledger is not journal
    run_name = run or default_run(segment)
    try:
        await ledger.open()
        seen = None if memory is None else memory.seen_phones(run_name)
        bulk = BulkSend(
            client,
            str(poll_id),
            segment,
            chunk_size=chunk_size,
            concurrency=concurrency,
            rate_limit=rate_limit,
            ledger=ledger,
            run_name=run_name,
            retry_rejected=retry_rejected,
            ignore_suppression=ignore_suppression,
            on_progress=on_progress,
            keep_accepted_users=keep_accepted_users,
            timeout=timeout,
            max_retries=max_retries,
            interrupt_grace=interrupt_grace,
            seen=seen,
            rules=rules,
            prepare=zone_preparer(rules, tz_for),
            defer=zone_deferral(rules),
        )
        report = await bulk.run(users)
        if follow:
            await follow_sent(client, ledger, run_name, follow_timeout)
        report.funnel = await ledger.funnel(run_name)
        return report
    finally:
        if owned:
            await ledger.aclose()
