"""The delivery ledger: one record per recipient of a run, so that nobody is
sent twice, whatever the input order, the process or the machine.

A run (``run=``, named by the caller) has one record per recipient (a
person: a :class:`~campaignkit.Phone`'s key): ``planned``, ``in_flight`` (taken by a claim for
one request), ``accepted`` (with its ``launch_request_id``), ``rejected``
(with the error) or ``ambiguous``. A recipient goes into a request only after
the claim that moves it to ``in_flight`` is durably committed; a claim is
atomic, so no two requests, processes or machines can send one recipient of a
run. A claim whose sender dies is reported ambiguous once it expires
(``claim_ttl``): never resent silently.

Each ledger also keeps a suppression list across its runs (``suppress``,
``unsuppress``, ``suppressed``, ``suppressions``): a number on it is filed
``suppressed`` (the reason in its record's ``detail``) when a run plans it,
instead of planned, unless the run ignores the list
(``plan(..., ignore_suppression=True)``); one listed after it was planned is
filed suppressed by the claim of its chunk, whatever the run said.

A ledger also keeps each run's options (``save_run_options``: the workers
read the producer's send window and lines there), enforces a run's
``daily_limit`` at claim time (the rest of a chunk is filed ``deferred``,
and planned again by a rerun), and remembers each person's sending line
(``assign_lines``) across runs.

After acceptance it learns each recipient's outcome (:class:`RecipientOutcome`:
the last deployment status, from ``follow``; delivered, read, replied and
opted out, from the webhooks: every ledger is an ``EventRecorder``), counts
the run's :class:`Funnel`, and gives the users of a follow-up run
(``follow_up_users``).

Each ledger has an ``identity``, written once when it is created: chunk
messages carry it, so that a worker on another ledger leaves them
(:class:`WrongLedger`), and a claim checks it, so that a ledger replaced
under a running send stops it. ``create=False`` opens only a ledger that
exists (:class:`LedgerNotFound` otherwise, nothing created): whoever reads
or resumes a run opens it so.

Every ledger is a :class:`Ledger`: its rules are written once, over a store
of plain primitives (``campaignkit.ledger._store``). Two durable stores share
the same SQL: :class:`SqliteLedger` (a file, the embedded default of
``journal="run.db"``) and :class:`PostgresLedger` (extra ``workers``);
:class:`MemoryLedger` keeps its store in memory (``send_bulk(journal=None)``
runs over one). Close a ledger with ``aclose()`` (``close()`` is a
deprecated alias).

The bulk pipeline and the workers build their reports from a ledger with
:func:`build_report` (:class:`Request`, :data:`OUTCOME`) and keep errors as
text with :func:`error_detail` / :func:`error_from_detail`.
"""

from __future__ import annotations

import os
from typing import TypeAlias

from .._funnel import Funnel
from ._build import OUTCOME, Request, build_report
from ._errors import error_detail, error_from_detail
from ._guarding import CANARY
from ._identity import LedgerNotFound, WrongLedger
from ._ledger import DEFAULT_CLAIM_TTL, Ledger
from ._memory import MemoryLedger
from ._outcomes import RecipientOutcome, StatusRow, failure_statuses
from ._postgres import PostgresLedger
from ._records import (
    ACCEPTED,
    AMBIGUOUS,
    DEFERRED,
    IN_FLIGHT,
    PLANNED,
    REJECTED,
    STALL_AFTER,
    STATES,
    SUPPRESSED,
    Claim,
    Held,
    Recipient,
    Recipients,
    Record,
    RunInfo,
    RunPause,
    Skipped,
    Stall,
)
from ._schema import LedgerUnavailable
from ._sqlite import SqliteLedger
from ._store import ClaimRow
from ._suppression import (
    MANUAL,
    OPT_OUT,
    SUPPRESSING_STATUSES,
    Suppression,
    entry_problems,
    suppression_phones,
    suppression_reason,
)

__all__ = [
    "ACCEPTED",
    "AMBIGUOUS",
    "CANARY",
    "DEFAULT_CLAIM_TTL",
    "DEFERRED",
    "IN_FLIGHT",
    "MANUAL",
    "OPT_OUT",
    "OUTCOME",
    "PLANNED",
    "REJECTED",
    "STALL_AFTER",
    "STATES",
    "SUPPRESSED",
    "SUPPRESSING_STATUSES",
    "Claim",
    "Held",
    "ClaimRow",
    "Funnel",
    "Journal",
    "Ledger",
    "LedgerNotFound",
    "LedgerUnavailable",
    "MemoryLedger",
    "PostgresLedger",
    "Recipient",
    "Recipients",
    "RecipientOutcome",
    "Record",
    "Request",
    "RunInfo",
    "RunPause",
    "Skipped",
    "SqliteLedger",
    "Stall",
    "Suppression",
    "StatusRow",
    "WrongLedger",
    "entry_problems",
    "failure_statuses",
    "build_report",
    "error_detail",
    "error_from_detail",
    "ledger_from",
    "suppression_phones",
    "suppression_reason",
]

Journal: TypeAlias = "str | os.PathLike[str] | Ledger"
"""What ``journal=`` takes: an SQLite path, a ``postgresql://`` DSN, or a ledger."""


def ledger_from(journal: Journal, *, create: bool = True) -> Ledger:
    """The ledger ``journal`` names: itself, a PostgreSQL DSN, or an SQLite path.

    ``create=False``: opening it refuses a ledger that does not exist
    (:class:`LedgerNotFound`), for whoever reads or resumes a run.
    """
    if isinstance(journal, Ledger):
        return journal
    if isinstance(journal, str) and journal.startswith(("postgresql://", "postgres://")):
        return PostgresLedger(journal, create=create)
    return SqliteLedger(journal, create=create)
