"""``send_bulk``: one process streaming users to a poll in chunks."""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping
from typing import Any, TypeAlias, Unpack

from .._input.users import InvalidInput
from .._input.validation import raise_problems
from .._report import BulkReport
from ..ledger import Ledger, MemoryLedger, ledger_from
from ..models import User
from ._engine import BulkSend
from ._options import BulkOptions, BulkOptionsDict, checked_options
from ._rehearsal import bounded, rehearse
from ._seam import BulkClient

UserInput: TypeAlias = (
    Iterable[User | Mapping[str, Any] | InvalidInput]
    | AsyncIterable[User | Mapping[str, Any] | InvalidInput]
)
"""What ``send_bulk`` reads: Users, wire-shaped dicts or :class:`InvalidInput`."""


def default_run(poll_id: str | int) -> str:
    """The run a ledger files a poll's sends under when no ``run=`` names one."""
    return f"poll-{poll_id}"


async def send_bulk(
    client: BulkClient,
    poll_id: str | int,
    users: UserInput,
    *,
    options: BulkOptions | None = None,
    **keywords: Unpack[BulkOptionsDict],
) -> BulkReport:
    """Send ``users`` to ``poll_id`` in chunks; see :mod:`campaignkit.bulk`.

    The options: ``options=BulkOptions(...)``, or its fields as keywords
    (not both); a bad one raises :class:`ValidationError` naming it.

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
    ``follow``: track every accepted launch as soon as its chunk is sent
    (:data:`DEFAULT_FOLLOW_CONCURRENCY` at a time; first the run's earlier
    launches not yet final) until it settles, writing each recipient's
    outcome into the ledger while the run still sends (so its ``breaker``
    pauses it mid-send), and return once they have settled (see
    :func:`follow_run`); a launch that cannot be followed is logged (a
    warning of ``campaignkit.bulk``), and the report returned all the same.
    ``follow_timeout``: once the send has ended, follow at most that many
    seconds more (None: until every accepted launch settles), then stop and
    return the report: what was read is written, the launches left are
    logged, and ``follow_run`` (or ``campaignkit runs RUN --follow``)
    resumes with them.
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

    The run protecting itself: ``breaker`` (a :class:`~campaignkit.Breaker`)
    pauses the run when too many of its last settled recipients failed;
    ``cooldown`` (a timedelta) defers people any run of the ledger messaged
    within it, unless they replied since (reason ``cooldown``);
    ``skip_open_conversations`` defers those who answered in the last 24 h
    (``open conversation``). A paused run sends nothing more (the report's
    ``paused`` says why) until ``ledger.resume_run(run)``.
    ``canary`` (a :class:`~campaignkit.Canary`): the first ``size``
    recipients are sent alone and followed (whatever ``follow`` says) until
    their shares are known or its ``wait`` has passed; the rest is sent only
    if they hold, else the run is paused (reason ``canary``) with the
    figures. The run is paused while they are judged, so a send
    interrupted then leaves the judgement to the run's next send; a run
    holding ``size`` sent recipients is not gated again.
    ``max_recipients``: an input of more users is refused (a
    :class:`ValidationError`) before anything is sent. ``dry_run``: the
    report of what the send would do now (``accepted``: those it would
    send), every rule applied, sending nothing and changing no ledger.

    Raises :class:`ValidationError` for a bad ``poll_id`` or option before
    anything is sent; per-user problems and request failures go in the report.
    """
    segment, options = checked_options(poll_id, users, options, keywords)
    journal = options.journal
    if journal is None and (options.run is not None or options.retry_rejected):
        raise_problems([("journal", "run= and retry_rejected= need a journal (a ledger)")])
    # Without a journal, the same pipeline runs over a ledger in memory, whose
    # index of the run's phones is also the planner's dedupe set.
    memory: MemoryLedger | None = None
    if journal is None:
        ledger: Ledger = (memory := MemoryLedger())
    else:
        ledger = ledger_from(journal)
    owned = ledger is not journal
    run_name = options.run or default_run(segment)
    users = await bounded(users, options.max_recipients)
    try:
        await ledger.open()
        if options.dry_run:
            return await rehearse(ledger, run_name, segment, users, options)
        seen = None if memory is None else memory.seen_phones(run_name)
        bulk = BulkSend(client, ledger, run_name, options, seen=seen)
        return await bulk.run(segment, users)
    finally:
        if owned:
            await ledger.aclose()
