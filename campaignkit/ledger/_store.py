"""What a backend implements: a :class:`Store` of plain primitives, each an
operation on a set of rows, with no rule of the ledger in it.

:class:`~campaignkit.ledger.Ledger` holds every rule (what a plan keeps,
what a claim takes, the daily limit, expiry, outcomes, reports) once, over
a store: SQLite and PostgreSQL share one in SQL (:mod:`._sql`), the memory
ledger has its own in compact columns (:mod:`._memory`). A new backend is
a store alone, held to the rules by the conformance suite (``tests/ledger``).

Recipients are keyed by run and phone (a :class:`~campaignkit.Phone` key);
primitives that change them take the states they change *from*, so that a
store never decides a transition.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, Self, TypeVar

import attrs

from .._funnel import OutcomeGroup
from .._report import SuppressedUser
from ._build import Request
from ._outcomes import RecipientOutcome, StatusRow
from ._records import Recipients, Record, RunInfo, Skipped
from ._suppression import Suppression

T = TypeVar("T")

ClaimRow = tuple[str, str, str, str | None, str | None]
"""A claim as :meth:`~campaignkit.ledger.Ledger.claims` gives it: ``(claim,
chunk, state, ack, detail)``."""


@attrs.frozen
class Where:
    """Which recipients of a run a :meth:`StoreTx.move` changes: those in one
    of ``states`` and, where given, of ``chunk``, and of one of ``claims`` or
    (not both) one of ``phones``."""

    states: Collection[str]
    chunk: str | None = None
    claims: Sequence[str] | None = None
    phones: Sequence[str] | None = None


class StoreTx(Protocol):
    """The primitives, run in one transaction (see :meth:`Store.transaction`)."""

    async def at_once(self, body: Callable[[Self], Coroutine[Any, Any, T]]) -> T:
        """``await body(self)``: ``body``'s primitives are the whole rest of
        the transaction. A store whose statements block runs it where they
        run, in one call, its commit with it (SQLite: in its thread), not a
        call a statement."""

    # -- the ledger and its runs

    async def identity(self) -> str | None:
        """The ledger's identity, None if none was written."""

    async def set_identity(self, identity: str, created: float) -> None: ...

    async def run(self, run: str) -> tuple[RunInfo, str] | None:
        """The run and its current input pass."""

    async def run_context(self, run: str) -> tuple[str | None, RunInfo | None, str | None]:
        """The ledger's identity, the run and its options (JSON text), in one
        read (what a claim reads first: one round trip, not three)."""

    async def runs(self) -> list[RunInfo]:
        """Every run, newest first."""

    async def add_run(self, run: str, poll: str, created: float) -> None:
        """Add the run, unless it exists."""

    async def update_run(self, run: str, fields: Mapping[str, Any]) -> None:
        """Set ``input_pass``, ``total`` or ``input_done`` of the run."""

    async def stop_run(self, run: str, detail: str, stopped: float) -> None:
        """Record the run's stop, unless one is recorded (or no such run)."""

    async def clear_stop(self, run: str) -> None: ...

    async def save_options(self, run: str, options: str, saved: float) -> None:
        """Keep the run's options (JSON text), replacing earlier ones."""

    async def options(self, run: str) -> str | None: ...

    async def lock(self, name: str) -> None:
        """Hold the lock ``name`` to the end of the transaction, against every
        other writer of the ledger."""

    # -- chunks, skipped inputs, claims

    async def add_chunk(self, run: str, chunk: str, size: int, created: float) -> None:
        """Add the chunk, unless it exists."""

    async def mark_enqueued(self, run: str, chunk: str) -> None: ...

    async def unenqueued_chunks(self, run: str, state: str) -> list[str]:
        """The chunks not marked enqueued holding a recipient in ``state``, oldest first."""

    async def add_skipped(self, run: str, input_pass: str, items: Sequence[Skipped]) -> None:
        """Add ``items`` to the pass's, keeping those of a position held already."""

    async def skipped(self, run: str, input_pass: str) -> list[Skipped]:
        """The pass's skipped inputs, in position order."""

    async def add_claim(
        self,
        run: str,
        claim: str,
        chunk: str,
        owner: str,
        positions: Sequence[int],
        claimed: float,
        expires: float,
    ) -> None:
        """Add the claim (in flight) of the recipients at ``positions`` (of
        its input, sorted), or make it so again if it exists (a retried
        claim, its first take given back)."""

    async def update_claims(
        self,
        run: str,
        to: str,
        states: Collection[str],
        *,
        claim: str | None = None,
        expired_before: float | None = None,
        fields: Mapping[str, str | None] | None = None,
    ) -> list[str]:
        """Move the run's claims in ``states`` (only ``claim``, or only those
        expiring before ``expired_before``) to ``to``, setting ``fields``
        (``ack``, ``detail``); their tokens."""

    async def claims(self, run: str) -> list[ClaimRow]:
        """Every claim of the run, oldest first."""

    # -- recipients

    async def upsert(
        self,
        run: str,
        chunk: str,
        recipients: Recipients,
        state: str,
        detail: str | None,
        replace: Collection[str],
        now: float,
    ) -> list[Record]:
        """File ``recipients`` into ``chunk`` in ``state`` with ``detail``,
        taken by no claim: those new to the run, and those held in a state of
        ``replace``; the others keep their records. Returned: the records
        kept, of those held in another chunk."""

    async def hold_chunk(self, run: str, chunk: str, claim: str) -> bool:
        """Reserve ``chunk`` for ``claim``, unless another claim of it is open
        or settled (not put back to planned); whether it is ``claim``'s now.
        The claim's reads of the chunk's planned recipients and its
        :meth:`take` come after it, in the same transaction."""

    async def take(
        self, run: str, chunk: str, states: Collection[str], to: str, claim: str, now: float
    ) -> Recipients:
        """Move the recipients of ``chunk`` in ``states`` to ``to`` under
        ``claim`` (which holds the chunk: :meth:`hold_chunk`); those moved,
        in input order."""

    async def move(
        self,
        run: str,
        where: Where,
        to: str,
        now: float,
        fields: Mapping[str, str | None] | None = None,
    ) -> int:
        """Move the recipients ``where`` selects to ``to``, setting ``fields``
        (``detail``, ``launch_request_id``, ``claim``); how many moved."""

    async def phones_in(self, run: str, chunk: str, state: str) -> list[str]:
        """The phones of the chunk's recipients in ``state``, in input order."""

    async def listed_in(self, run: str, chunk: str, state: str) -> list[tuple[str, Suppression]]:
        """The chunk's recipients in ``state`` whose numbers were put on the
        suppression list since their record last changed (at that time or
        after): phone and entry."""

    async def budget_used(self, since: float, states: Collection[str]) -> tuple[int, float | None]:
        """Across runs, the people taken by claims made after ``since`` whose
        records are in ``states``, and when the oldest such claim was made."""

    async def counted_among(
        self, since: float, states: Collection[str], phones: Sequence[str]
    ) -> set[str]:
        """Those of ``phones`` that :meth:`budget_used` counts."""

    async def counts(self, run: str) -> dict[str, int]:
        """The run's recipients by state (states holding none may be left out)."""

    async def skipped_counts(self, run: str, input_pass: str) -> dict[str, int]:
        """The pass's skipped inputs by kind."""

    async def held(self, run: str, phones: Sequence[str]) -> dict[str, tuple[Record, float | None]]:
        """The records of ``phones``, each with when its claim was made."""

    async def last_update(self, run: str) -> float | None:
        """When a recipient of the run last changed."""

    # -- sending lines

    async def lines_of(self, phones: Sequence[str]) -> dict[str, str]: ...

    async def line_load(self, lines: Sequence[str]) -> dict[str, int]:
        """The people on each of ``lines`` (lines without any may be left out)."""

    async def set_lines(self, assigned: Mapping[str, str], now: float) -> None: ...

    async def add_line_load(self, changes: Mapping[str, int]) -> None: ...

    # -- the suppression list

    async def suppressions_of(self, phones: Sequence[str]) -> dict[str, Suppression]: ...

    async def add_suppressions(
        self, phones: Sequence[str], reason: str, source: str | None, added: float
    ) -> int:
        """Add entries for those of ``phones`` not listed; how many were added."""

    async def remove_suppressions(self, phones: Sequence[str]) -> int: ...

    # -- webhook deliveries

    async def add_seen(self, namespace: str, key: str, seen: float) -> bool:
        """Add ``key``; whether it was new."""

    async def prune_seen(self, namespace: str, before: float) -> int: ...

    async def forget_seen(self, namespace: str, key: str) -> None: ...

    # -- outcomes

    async def upsert_statuses(self, run: str, rows: Sequence[StatusRow]) -> None:
        """Set each phone's status, unless it holds that status already."""

    async def add_final(self, run: str, launches: Sequence[str], at: float) -> None: ...

    async def final_launches(self, run: str) -> set[str]: ...

    async def run_of_accepted(self, phone: str, state: str) -> str | None:
        """The most recent run holding ``phone`` in ``state``."""

    async def set_fact(
        self,
        run: str,
        phone: str,
        fact: str,
        at: float,
        conversation_id: str | None,
        answer: str | None,
    ) -> None:
        """Set the time column ``fact`` of the phone's outcome, its
        conversation and answer, each unless set already."""

    async def launch_phones(
        self, run: str, state: str, launches: Collection[str]
    ) -> dict[str, list[str]]:
        """The phones of the run's recipients in ``state``, by launch, for ``launches``."""

    async def outcomes(self, run: str) -> list[RecipientOutcome]:
        """The run's outcomes, by phone."""

    async def outcome_groups(self, run: str) -> list[OutcomeGroup]: ...

    # -- paused runs (their pause is read with the run: :attr:`RunInfo.paused`)

    async def pause_run(self, run: str, reason: str, detail: str, paused: float) -> bool:
        """Record the run's pause, unless one is recorded (or no such run);
        whether it was recorded."""

    async def resume_run(self, run: str) -> bool:
        """Forget the run's pause; whether it had one."""

    async def judge_canary(self, run: str, judged: float) -> None:
        """Record when the run's canary was taken to judgement, unless it is
        (read with the run: :attr:`RunInfo.canary_judged`)."""

    async def running_runs(self, states: Collection[str]) -> list[str]:
        """The runs neither stopped nor paused whose input is not all read,
        or that hold a recipient in ``states``."""

    async def settled_recent(
        self, run: str, limit: int, final: Collection[str], failures: Collection[str]
    ) -> list[tuple[float, int, int]]:
        """The run's latest settled recipients, as ``(when, settled, failed)``
        groups, newest first: each of its last ``limit`` outcomes in a
        ``final`` status (failed if one of ``failures``) or delivered, one a
        group; and each claim settled rejected, its recipients a group."""

    async def contacted_in(
        self, run: str, chunk: str, state: str, since: float, states: Collection[str]
    ) -> list[str]:
        """The phones of the chunk's recipients in ``state`` that a run of the
        ledger (any) holds in one of ``states``, changed since ``since``,
        with no reply recorded there since that change."""

    async def answered_in(self, run: str, chunk: str, state: str, since: float) -> list[str]:
        """The phones of the chunk's recipients in ``state`` who replied to a
        run of the ledger (any) since ``since``."""


class Store(Protocol):
    """A backend of :class:`~campaignkit.ledger.Ledger`."""

    async def open(self) -> bool:
        """Connect (creating the schema on first use); whether it was created."""

    async def aclose(self) -> None: ...

    def transaction(self, *, durable: bool = True) -> AbstractAsyncContextManager[StoreTx]:
        """One transaction: committed on success, rolled back on error.

        Committed durably, or (not ``durable``) without waiting for the disk:
        such a commit outlives the process at once, and a crash of the
        machine only once a durable commit follows it (one made durable
        makes every earlier one so)."""

    def records(self, run: str, states: Sequence[str], page_size: int) -> AsyncIterator[Record]:
        """The run's recipients in ``states``, in input order (read page by page)."""

    def suppressions(self, page_size: int) -> AsyncIterator[Suppression]:
        """Every entry of the suppression list, in phone order (page by page)."""

    async def report_groups(
        self, run: str, acks: Mapping[str, str]
    ) -> tuple[list[Request], list[SuppressedUser], float | None]:
        """The run's recipients as its report counts them: grouped by claim
        and state (see :func:`~._build.requests_of`), its suppressed ones,
        and when one last changed (:meth:`StoreTx.last_update`). A store
        that keeps them grouped answers without a record each."""

    def rehearsal(self) -> AbstractAsyncContextManager[Store]:
        """A store over this one's contents whose every change is undone when
        it ends (a dry run): nothing of it is ever seen by another writer."""
