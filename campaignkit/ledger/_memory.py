"""The memory ledger: ``send_bulk(journal=None)`` runs over it.

It keeps the rules of the durable ledgers (the same conformance suite holds
it to them) in the compact shape of :mod:`._memory_runs`; a batch's users
(their wire JSON) are dropped once the service has accepted them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from itertools import pairwise

import attrs

from .._report import SuppressedUser
from ..errors import LedgerError
from ._build import Request, user_of
from ._identity import new_identity
from ._memory_outcomes import MemoryOutcomes
from ._memory_runs import Batch, ClaimState, RunState
from ._memory_seen import MemorySeen
from ._memory_suppressions import MemorySuppressions
from ._protocol import DEFAULT_CLAIM_TTL, EXPIRED, Ledger
from ._records import (
    ACCEPTED,
    AMBIGUOUS,
    DEFERRED,
    IN_FLIGHT,
    PLANNED,
    REJECTED,
    STATES,
    SUPPRESSED,
    Claim,
    Recipient,
    Recipients,
    Record,
    RunInfo,
    Skipped,
)
from ._sending_memory import MemorySendingRules
from ._suppression import Suppression


class MemoryLedger(MemoryOutcomes, MemorySendingRules, MemorySuppressions, MemorySeen, Ledger):
    """A ledger in this process's memory, with the rules of the durable ones.

    What ``send_bulk(journal=None)`` runs over; pass one as ``journal=`` to read the run
    back (``report``, ``records``, ``outcomes``) or to rerun it in the same process. It is
    gone with the process: a crash loses it, so it resumes nothing after one. It keeps no
    users of accepted recipients (their records' ``user`` is None). Closing it keeps its
    contents (like a file); operations need it open.
    """

    def __init__(self, *, claim_ttl: float = DEFAULT_CLAIM_TTL) -> None:
        super().__init__(claim_ttl=claim_ttl)
        # Its contents live as long as the object: so does its identity.
        self._identity = new_identity()
        self.is_new = True
        self._open = False
        self._runs: dict[str, RunState] = {}
        self._seen: dict[str, dict[str, float]] = {}
        self._suppressions: dict[str, Suppression] = {}

    def __repr__(self) -> str:
        return f"<MemoryLedger {len(self._runs)} runs>"

    async def open(self) -> None:
        self._open = True

    async def aclose(self) -> None:
        self._open = False

    def _check_open(self) -> None:
        if not self._open:
            raise LedgerError("the memory ledger is not open")

    def _run(self, run: str) -> RunState | None:
        self._check_open()
        return self._runs.get(run)

    def _state(self, run: str) -> RunState:
        state = self._run(run)
        if state is None:
            state = self._runs[run] = RunState()
        return state

    def seen_phones(self, run: str) -> RunState:
        """The run's phone index, as the dedupe set of a planner reading the
        run's only input pass (``send_bulk(journal=None)``): one structure
        serves both. Not for a run planned by more than one pass."""
        return self._state(run)

    # -- the rules of a run

    async def start_run(self, run: str, poll: str, *, input_pass: str | None = None) -> RunInfo:
        state = self._state(run)
        if state.info is None:
            state.info = RunInfo(run, poll, time.time())
        if state.info.poll != poll:
            raise LedgerError(
                f"run {run!r} of this ledger sends poll {state.info.poll}, not poll {poll}: "
                "name another run (run=...)"
            )
        if input_pass is not None:
            state.input_pass = input_pass
            state.info = attrs.evolve(state.info, total=None, input_done=False, stopped=None)
        return state.info

    async def stop_run(self, run: str, detail: str) -> None:
        state = self._run(run)
        if state is not None and state.info is not None and state.info.stopped is None:
            state.info = attrs.evolve(state.info, stopped=detail)

    async def plan(
        self,
        run: str,
        chunk: str,
        recipients: Sequence[Recipient],
        *,
        retry_rejected: bool = False,
        ignore_suppression: bool = False,
        deferred: Mapping[str, str] | None = None,
    ) -> list[Record]:
        state = self._state(run)
        now = time.time()
        state.chunks.setdefault(chunk, (now, False))
        adopt = (PLANNED, DEFERRED, SUPPRESSED) + ((REJECTED,) if retry_rejected else ())
        columns = Recipients.of(recipients)
        listed = {} if ignore_suppression else self._entries(columns.phones)
        if not listed and not deferred:
            return state.file(chunk, columns, adopt, None, now)
        deferred = deferred or {}
        by_filing: dict[tuple[str, str] | None, list[Recipient]] = {}  # a batch each
        for recipient in recipients:
            filed: tuple[str, str] | None = None
            if (entry := listed.get(recipient.phone)) is not None:
                filed = (SUPPRESSED, entry.reason)
            elif (why := deferred.get(recipient.phone)) is not None:
                filed = (DEFERRED, why)
            by_filing.setdefault(filed, []).append(recipient)
        held: list[Record] = []
        for filed, group in by_filing.items():
            held += state.file(chunk, group, adopt, filed, now)
        return held

    async def claim(self, run: str, chunk: str, *, owner: str = "") -> Claim | None:
        state = self._state(run)
        token, now = uuid.uuid4().hex, time.time()
        self._suppress_late(state, chunk, now)
        self._defer_over_budget(run, state, chunk, now)
        batches = [b for b in state.by_chunk.get(chunk, ()) if b.state == PLANNED and b.live]
        if not batches:
            return None
        for batch in batches:
            batch.state, batch.claim, batch.updated = IN_FLIGHT, token, now
        recipients = _claimed(batches)
        expires = now + self.claim_ttl
        state.claims[token] = ClaimState(
            chunk, owner, len(recipients), now, expires, batches=batches
        )
        self._note_claim(run, token, now)
        return Claim(token, chunk, recipients, expires)

    async def settle(
        self,
        run: str,
        claim: str,
        state: str,
        *,
        launch_request_id: str | None = None,
        ack: str | None = None,
        detail: str | None = None,
    ) -> None:
        if state not in (ACCEPTED, REJECTED, AMBIGUOUS):
            raise LedgerError(f"a claim settles as accepted, rejected or ambiguous, not {state!r}")
        ended = self._state(run).end_claim(claim, state, launch_request_id, ack, detail)
        if ended:
            # Let a long run's other tasks go on between two settles.
            await asyncio.sleep(0)

    async def release(self, run: str, claim: str) -> None:
        self._state(run).end_claim(claim, PLANNED, None, None, None)

    async def expire(self, run: str, *, now: float | None = None) -> int:
        now = time.time() if now is None else now
        expired = 0
        for found in self._state(run).claims.values():
            if found.state != IN_FLIGHT or not found.expires < now:
                continue
            found.state, found.detail = AMBIGUOUS, EXPIRED
            for batch in found.batches:
                if batch.state == IN_FLIGHT:
                    batch.state, batch.detail, batch.updated = AMBIGUOUS, EXPIRED, now
                    expired += batch.live
        return expired

    async def finish_input(self, run: str, total: int) -> None:
        state = self._run(run)
        if state is not None and state.info is not None:
            state.info = attrs.evolve(state.info, total=total, input_done=True)

    async def mark_enqueued(self, run: str, chunk: str) -> None:
        state = self._run(run)
        if state is not None and chunk in state.chunks:
            state.chunks[chunk] = (state.chunks[chunk][0], True)

    async def unenqueued_chunks(self, run: str) -> list[str]:
        state = self._run(run)
        if state is None:
            return []
        waiting = {b.chunk for b in state.batches if b.state == PLANNED and b.live}
        pending = [(created, c) for c, (created, done) in state.chunks.items() if not done]
        return [chunk for _, chunk in sorted(pending) if chunk in waiting]

    async def skip(self, run: str, items: Sequence[Skipped]) -> None:
        if not items:
            return
        state = self._state(run)
        if state.info is None:
            raise LedgerError(f"this ledger has no run {run!r}: start_run() first")
        kept = state.skipped.setdefault(state.input_pass, {})
        for item in items:
            kept.setdefault(item.position, item)

    # -- reading

    async def run_info(self, run: str) -> RunInfo | None:
        state = self._run(run)
        return None if state is None else state.info

    async def runs(self) -> list[RunInfo]:
        self._check_open()
        infos = [state.info for state in self._runs.values() if state.info is not None]
        return sorted(infos, key=lambda info: (-info.created, info.run))

    async def counts(self, run: str) -> dict[str, int]:
        counts = dict.fromkeys((*STATES, "invalid", "duplicate"), 0)
        state = self._run(run)
        if state is None:
            return counts
        for batch in state.batches:
            counts[batch.state] += batch.live
        for item in state.skipped.get(state.input_pass, {}).values():
            counts[item.kind] += 1
        return counts

    async def records(
        self, run: str, states: Sequence[str] = STATES, *, page_size: int = 10_000
    ) -> AsyncIterator[Record]:
        state = self._run(run)
        if state is None:
            return
        found = state.current(set(states))
        for start in range(0, len(found), page_size):
            for _, phone, number in found[start : start + page_size]:
                yield state.record(number, phone)
            await asyncio.sleep(0)

    async def report_groups(
        self, run: str, acks: Mapping[str, str]
    ) -> tuple[list[Request], list[SuppressedUser]]:
        # Batch by batch, not a record each: a report of 1,000,000 recipients
        # costs no more than its chunks (row 6n).
        state = self._run(run)
        groups: dict[tuple[str | None, str, str | None], list[Batch]] = {}
        suppressed: list[SuppressedUser] = []
        for batch in () if state is None else state.batches:
            if batch.state == SUPPRESSED:
                suppressed += _suppressed(batch)
            elif batch.live:
                why = batch.detail if batch.state == DEFERRED else None
                groups.setdefault((batch.claim, batch.state, why), []).append(batch)
        requests = [
            _request(claim, state, batches, acks.get(claim or "") if state == ACCEPTED else None)
            for (claim, state, _), batches in groups.items()
        ]
        return requests, suppressed

    async def held(self, run: str, phones: Sequence[str]) -> dict[str, tuple[Record, float | None]]:
        state = self._run(run)
        return {} if state is None else state.held(phones)

    async def claims(self, run: str) -> list[tuple[str, str, str, str | None, str | None]]:
        state = self._run(run)
        if state is None:
            return []
        ordered = sorted(state.claims.items(), key=lambda item: (item[1].claimed, item[0]))
        return [(token, c.chunk, c.state, c.ack, c.detail) for token, c in ordered]

    async def skipped(self, run: str) -> list[Skipped]:
        state = self._run(run)
        if state is None:
            return []
        return sorted(state.skipped.get(state.input_pass, {}).values(), key=lambda s: s.position)

    async def last_update(self, run: str) -> float | None:
        state = self._run(run)
        return max((b.updated for b in state.batches), default=None) if state else None


def _request(claim: str | None, state: str, batches: Sequence[Batch], ack: str | None) -> Request:
    """``batches`` (one claim's, in one state) as one request of a report."""
    if len(batches) == 1 and not batches[0].dead:
        batch = batches[0]
        users = None if batch.recipients is None else batch.recipients.users
        return Request(claim, state, batch.positions, users, detail=batch.detail, ack=ack)
    rows = sorted(
        (batch.positions[i], None if batch.recipients is None else batch.recipients.users[i])
        for batch in batches
        for i in range(batch.size)
        if i not in batch.dead
    )
    users = None if any(user is None for _, user in rows) else [user or "{}" for _, user in rows]
    detail = batches[0].detail
    return Request(claim, state, [position for position, _ in rows], users, detail=detail, ack=ack)


def _suppressed(batch: Batch) -> list[SuppressedUser]:
    recipients = batch.recipients
    assert recipients is not None, "a suppressed batch keeps its recipients"
    return [
        SuppressedUser(batch.positions[i], recipients.phones[i], batch.detail or "", user_of(user))
        for i, user in enumerate(recipients.users)
        if i not in batch.dead
    ]


def _claimed(batches: Sequence[Batch]) -> Recipients:
    """The live recipients of ``batches``, in input order."""
    first = batches[0].recipients
    assert first is not None
    if len(batches) == 1 and not batches[0].dead and _ascending(first.positions):
        return first  # a chunk planned whole, as send_bulk's are: nothing to copy
    live: list[Recipient] = []
    for batch in batches:
        assert batch.recipients is not None
        dead = batch.dead
        live += (r for i, r in enumerate(batch.recipients) if i not in dead)
    live.sort(key=lambda r: (r.position, r.phone))
    return Recipients.of(live)


def _ascending(positions: Sequence[int]) -> bool:
    return isinstance(positions, range) or all(a < b for a, b in pairwise(positions))
