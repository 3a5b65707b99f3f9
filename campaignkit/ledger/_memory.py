"""The memory ledger: ``send_bulk(journal=None)`` runs over it.

Its store answers the primitives of :mod:`._store` over plain structures:
each run's recipients in the compact shape of :mod:`._memory_runs`, dicts
for the small tables. A batch's users (their wire JSON) are dropped once the
service has accepted them: the memory ledger keeps no users of accepted
recipients.
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter, deque
from collections.abc import (
    AsyncIterator,
    Callable,
    Collection,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import attrs

from .._funnel import OutcomeGroup
from .._report import SuppressedUser
from ..errors import LedgerError
from ._build import Request, user_of
from ._identity import new_identity
from ._ledger import DEFAULT_CLAIM_TTL, Ledger
from ._memory_runs import Batch, ClaimState, OutcomeRow, RunState, claimed, live
from ._outcomes import RecipientOutcome, StatusRow
from ._records import (
    ACCEPTED,
    DEFERRED,
    REJECTED,
    SUPPRESSED,
    Recipients,
    Record,
    RunInfo,
    RunPause,
    Skipped,
)
from ._store import ClaimRow, Where
from ._suppression import Suppression

T = TypeVar("T")

_STATUS, _ANSWER = 2, 7
_FACT_AT = {"delivered_at": 4, "read_at": 5, "replied_at": 6, "opted_out_at": 8}
_NO_OUTCOME: OutcomeRow = (None,) * 9


def _key(phone: str) -> int | str:
    """A phone as an int where it fits 64 bits (as ``RunState.keys_of`` gives it)."""
    digits = phone[1:]
    return int("1" + digits) if len(digits) <= 18 and digits.isdigit() else phone


class MemoryLedger(Ledger):
    """A ledger in this process's memory, with the rules of the durable ones.

    What ``send_bulk(journal=None)`` runs over; pass one as ``journal=`` to read the run
    back (``report``, ``records``, ``outcomes``) or to rerun it in the same process. It is
    gone with the process: a crash loses it, so it resumes nothing after one. It keeps no
    users of accepted recipients (their records' ``user`` is None). Closing it keeps its
    contents (like a file); operations need it open.
    """

    store: MemoryStore

    def __init__(self, *, claim_ttl: float = DEFAULT_CLAIM_TTL) -> None:
        store = MemoryStore()
        super().__init__(store, claim_ttl=claim_ttl)
        # Its contents live as long as the object: so does its identity.
        self._identity = store.identity_
        self.is_new = True

    def __repr__(self) -> str:
        return f"<MemoryLedger {len(self.store.runs_)} runs>"

    def seen_phones(self, run: str) -> RunState:
        """The run's phone index, as the dedupe set of a planner reading the
        run's only input pass (``send_bulk(journal=None)``): one structure
        serves both. Not for a run planned by more than one pass."""
        return self.store.state(run)


@attrs.frozen
class _Taken:
    """A claim, for the daily limit's count of the people it took."""

    claimed: float
    run: str
    claim: str


class MemoryStore:
    """The primitives of :mod:`._store` in this process's memory; each is
    atomic (it never waits), so a transaction is the store itself."""

    def __init__(self) -> None:
        self.identity_ = new_identity()
        self.is_open = False
        self.runs_: dict[str, RunState] = {}
        self._seen: dict[str, dict[str, float]] = {}
        self._suppressions: dict[str, Suppression] = {}
        self._options: dict[str, str] = {}
        self._lines: dict[str, str] = {}
        self._line_load: Counter[str] = Counter()
        self._taken: deque[_Taken] = deque()
        self._pauses: dict[str, RunPause] = {}
        self._canaries: dict[str, float] = {}

    async def open(self) -> bool:
        self.is_open = True
        return True

    async def aclose(self) -> None:
        self.is_open = False

    def _check_open(self) -> None:
        if not self.is_open:
            raise LedgerError("the memory ledger is not open")

    @asynccontextmanager
    async def rehearsal(self) -> AsyncIterator[MemoryStore]:
        # A copy, thrown away at the end.
        self._check_open()
        yield copy.deepcopy(self)

    @asynccontextmanager
    async def transaction(self, *, durable: bool = True) -> AsyncIterator[MemoryStore]:
        self._check_open()
        yield self
        # Let a long run's other tasks go on between two operations.
        await asyncio.sleep(0)

    async def at_once(self, body: Callable[[MemoryStore], Coroutine[Any, Any, T]]) -> T:
        return await body(self)

    def state(self, run: str) -> RunState:
        """The run's state, made empty if new (as recipients planned before
        the run started are kept in SQL)."""
        self._check_open()
        state = self.runs_.get(run)
        if state is None:
            state = self.runs_[run] = RunState()
        return state

    def _info(self, run: str) -> RunState | None:
        state = self.runs_.get(run)
        return state if state is not None and state.info is not None else None

    async def records(
        self, run: str, states: Sequence[str], page_size: int
    ) -> AsyncIterator[Record]:
        self._check_open()
        state = self.runs_.get(run)
        if state is None:
            return
        found = state.current(set(states))
        for start in range(0, len(found), page_size):
            for _, phone, number in found[start : start + page_size]:
                yield state.record(number, phone)
            await asyncio.sleep(0)

    async def suppressions(self, page_size: int) -> AsyncIterator[Suppression]:
        self._check_open()
        kept = self._suppressions
        ordered = sorted(kept)
        for start in range(0, len(ordered), page_size):
            for phone in ordered[start : start + page_size]:
                if (entry := kept.get(phone)) is not None:  # not removed meanwhile
                    yield entry
            await asyncio.sleep(0)

    async def report_groups(
        self, run: str, acks: Mapping[str, str]
    ) -> tuple[list[Request], list[SuppressedUser], float | None]:
        # Batch by batch, not a record each: a report of 1,000,000 recipients
        # costs no more than its chunks (row 6n).
        self._check_open()
        state = self.runs_.get(run)
        groups: dict[tuple[str | None, str, str | None], list[Batch]] = {}
        suppressed: list[SuppressedUser] = []
        kept = () if state is None else state.batches
        for batch in kept:
            if batch.state == SUPPRESSED:
                suppressed += _suppressed(batch)
            elif batch.live:
                why = batch.detail if batch.state == DEFERRED else None
                groups.setdefault((batch.claim, batch.state, why), []).append(batch)
        requests = [
            _request(claim, state, batches, acks.get(claim or "") if state == ACCEPTED else None)
            for (claim, state, _), batches in groups.items()
        ]
        return requests, suppressed, max((batch.updated for batch in kept), default=None)

    # -- the ledger and its runs

    async def identity(self) -> str | None:
        return self.identity_

    async def set_identity(self, identity: str, created: float) -> None:
        self.identity_ = identity

    async def run(self, run: str) -> tuple[RunInfo, str] | None:
        state = self._info(run)
        if state is None or state.info is None:
            return None
        return self._paused(state.info), state.input_pass

    async def run_context(self, run: str) -> tuple[str | None, RunInfo | None, str | None]:
        found = await self.run(run)
        return self.identity_, None if found is None else found[0], self._options.get(run)

    async def runs(self) -> list[RunInfo]:
        infos = [self._paused(s.info) for s in self.runs_.values() if s.info is not None]
        return sorted(infos, key=lambda info: (-info.created, info.run))

    def _paused(self, info: RunInfo) -> RunInfo:
        """``info`` with its pause and its canary's judgement, as the SQL
        store reads them with the run."""
        pause, judged = self._pauses.get(info.run), self._canaries.get(info.run)
        if pause is None and judged is None:
            return info
        return attrs.evolve(info, paused=pause, canary_judged=judged)

    async def add_run(self, run: str, poll: str, created: float) -> None:
        state = self.state(run)
        if state.info is None:
            state.info = RunInfo(run, poll, created)

    async def update_run(self, run: str, fields: Mapping[str, Any]) -> None:
        state = self._info(run)
        if state is None or state.info is None:
            return
        changes = dict(fields)
        state.input_pass = changes.pop("input_pass", state.input_pass)
        state.info = attrs.evolve(state.info, **changes)

    async def stop_run(self, run: str, detail: str, stopped: float) -> None:
        state = self._info(run)
        if state is not None and state.info is not None and state.info.stopped is None:
            state.info = attrs.evolve(state.info, stopped=detail)

    async def clear_stop(self, run: str) -> None:
        state = self._info(run)
        if state is not None and state.info is not None:
            state.info = attrs.evolve(state.info, stopped=None)

    async def save_options(self, run: str, options: str, saved: float) -> None:
        self._options[run] = options

    async def options(self, run: str) -> str | None:
        return self._options.get(run)

    async def lock(self, name: str) -> None:
        """Nothing to do: a transaction of this store never waits."""

    # -- chunks, skipped inputs, claims

    async def add_chunk(self, run: str, chunk: str, size: int, created: float) -> None:
        self.state(run).chunks.setdefault(chunk, (created, False))

    async def mark_enqueued(self, run: str, chunk: str) -> None:
        chunks = self.state(run).chunks
        if chunk in chunks:
            chunks[chunk] = (chunks[chunk][0], True)

    async def unenqueued_chunks(self, run: str, state: str) -> list[str]:
        found = self.state(run)
        holding = {b.chunk for b in found.batches if b.state == state and b.live}
        pending = [(created, c) for c, (created, done) in found.chunks.items() if not done]
        return [chunk for _, chunk in sorted(pending) if chunk in holding]

    async def add_skipped(self, run: str, input_pass: str, items: Sequence[Skipped]) -> None:
        kept = self.state(run).skipped.setdefault(input_pass, {})
        for item in items:
            kept.setdefault(item.position, item)

    async def skipped(self, run: str, input_pass: str) -> list[Skipped]:
        kept = self.state(run).skipped.get(input_pass, {})
        return sorted(kept.values(), key=lambda item: item.position)

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
        claims = self.state(run).claims
        if claim not in claims:
            self._taken.append(_Taken(claimed, run, claim))
        claims[claim] = ClaimState(chunk, owner, len(positions), claimed, expires)

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
        claims = self.state(run).claims
        if claim is not None:
            candidates = [(claim, claims[claim])] if claim in claims else []
        else:
            candidates = list(claims.items())
        moved = []
        for token, found in candidates:
            if found.state not in states:
                continue
            if expired_before is not None and not found.expires < expired_before:
                continue
            found.state = to
            for name, value in (fields or {}).items():
                setattr(found, name, value)
            moved.append(token)
        return moved

    async def claims(self, run: str) -> list[ClaimRow]:
        claims = self.state(run).claims
        ordered = sorted(claims.items(), key=lambda item: (item[1].claimed, item[0]))
        return [(token, c.chunk, c.state, c.ack, c.detail) for token, c in ordered]

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
        return self.state(run).upsert(chunk, recipients, state, detail, replace, now)

    async def hold_chunk(self, run: str, chunk: str, claim: str) -> bool:
        return True  # each recipient keeps its state: a taken one is not planned

    async def take(
        self, run: str, chunk: str, states: Collection[str], to: str, claim: str, now: float
    ) -> Recipients:
        found = self.state(run)
        batches = [b for b in found.by_chunk.get(chunk, ()) if b.live and b.state in states]
        if not batches:
            return Recipients([], [], [])
        found.set(batches, to, {"claim": claim}, now)
        return claimed(batches)

    async def move(
        self,
        run: str,
        where: Where,
        to: str,
        now: float,
        fields: Mapping[str, str | None] | None = None,
    ) -> int:
        found = self.state(run)
        if where.claims is not None:
            batches = [b for token in where.claims for b in found.of_claim(token)]
        elif where.chunk is not None:
            batches = found.by_chunk.get(where.chunk, [])
        else:
            batches = found.batches
        batches = [b for b in batches if b.state in where.states and b.live]
        if where.phones is not None:
            # Only some records of the batches: split into batches of their own.
            chosen = set(where.phones)
            picked = [(b, offset) for b, offset, phone, _ in live(batches) if phone in chosen]
            batches = found.split(picked, now)
        return found.set(batches, to, fields or {}, now)

    async def phones_in(self, run: str, chunk: str, state: str) -> list[str]:
        batches = self.state(run).in_chunk(chunk, (state,))
        return [phone for _, phone in sorted((q, p) for _, _, p, q in live(batches))]

    async def listed_in(self, run: str, chunk: str, state: str) -> list[tuple[str, Suppression]]:
        kept = self._suppressions
        if not kept:
            return []
        batches = self.state(run).in_chunk(chunk, (state,))
        return [
            (phone, entry)
            for batch, _, phone, _ in live(batches)
            if (entry := kept.get(phone)) is not None and entry.added >= batch.updated
        ]

    def _counted(
        self, since: float, states: Collection[str]
    ) -> tuple[set[int | str], float | None]:
        taken = self._taken
        while taken and taken[0].claimed <= since:
            taken.popleft()
        counted: set[int | str] = set()
        oldest = None
        for claim in taken:
            found = self.runs_.get(claim.run)
            batches = [] if found is None else found.of_claim(claim.claim)
            batches = [b for b in batches if b.state in states]
            if found is not None and batches:
                oldest = claim.claimed if oldest is None else min(oldest, claim.claimed)
                counted.update(found.keys_of(batches))
        return counted, oldest

    async def budget_used(self, since: float, states: Collection[str]) -> tuple[int, float | None]:
        counted, oldest = self._counted(since, states)
        return len(counted), oldest

    async def counted_among(
        self, since: float, states: Collection[str], phones: Sequence[str]
    ) -> set[str]:
        counted = self._counted(since, states)[0]
        return {phone for phone in phones if _key(phone) in counted}

    async def counts(self, run: str) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for batch in self.state(run).batches:
            counts[batch.state] += batch.live
        return dict(counts)

    async def skipped_counts(self, run: str, input_pass: str) -> dict[str, int]:
        kept = self.state(run).skipped.get(input_pass, {})
        return dict(Counter(item.kind for item in kept.values()))

    async def held(self, run: str, phones: Sequence[str]) -> dict[str, tuple[Record, float | None]]:
        return self.state(run).held(phones)

    async def last_update(self, run: str) -> float | None:
        return max((b.updated for b in self.state(run).batches), default=None)

    # -- sending lines

    async def lines_of(self, phones: Sequence[str]) -> dict[str, str]:
        lines = self._lines
        return {phone: lines[phone] for phone in phones if phone in lines}

    async def line_load(self, lines: Sequence[str]) -> dict[str, int]:
        return {line: self._line_load[line] for line in lines if line in self._line_load}

    async def set_lines(self, assigned: Mapping[str, str], now: float) -> None:
        self._lines.update(assigned)

    async def add_line_load(self, changes: Mapping[str, int]) -> None:
        self._line_load.update(changes)

    # -- the suppression list

    async def suppressions_of(self, phones: Sequence[str]) -> dict[str, Suppression]:
        kept = self._suppressions
        return {phone: kept[phone] for phone in phones if phone in kept} if kept else {}

    async def add_suppressions(
        self, phones: Sequence[str], reason: str, source: str | None, added: float
    ) -> int:
        kept = self._suppressions
        new = [phone for phone in dict.fromkeys(phones) if phone not in kept]
        kept.update((phone, Suppression(phone, reason, source, added)) for phone in new)
        return len(new)

    async def remove_suppressions(self, phones: Sequence[str]) -> int:
        kept = self._suppressions
        return sum(kept.pop(phone, None) is not None for phone in phones)

    # -- webhook deliveries

    async def add_seen(self, namespace: str, key: str, seen: float) -> bool:
        keys = self._seen.setdefault(namespace, {})
        if key in keys:
            return False
        keys[key] = seen
        return True

    async def prune_seen(self, namespace: str, before: float) -> int:
        keys = self._seen.setdefault(namespace, {})
        old = [key for key, when in keys.items() if when < before]
        for key in old:
            del keys[key]
        return len(old)

    async def forget_seen(self, namespace: str, key: str) -> None:
        self._seen.setdefault(namespace, {}).pop(key, None)

    # -- outcomes

    async def upsert_statuses(self, run: str, rows: Sequence[StatusRow]) -> None:
        kept = self.state(run).outcomes
        get = kept.get
        for phone, launch, conversation, status, at in rows:
            row = get(phone)
            if row is None:  # the usual case: a recipient's first status
                kept[phone] = (launch, conversation, status, at, None, None, None, None, None)
            elif row[_STATUS] != status:  # the same status seen again keeps its time
                kept[phone] = (launch, conversation, status, at, *row[4:])

    async def add_final(self, run: str, launches: Sequence[str], at: float) -> None:
        self.state(run).final.update(launches)

    async def final_launches(self, run: str) -> set[str]:
        return set(self.state(run).final)

    async def run_of_accepted(self, phone: str, state: str) -> str | None:
        started = [found.info for found in self.runs_.values() if found.info is not None]
        for info in sorted(started, key=lambda info: (info.created, info.run), reverse=True):
            held = self.runs_[info.run].held([phone]).get(phone)
            if held is not None and held[0].state == state:
                return info.run
        return None

    async def set_fact(
        self,
        run: str,
        phone: str,
        fact: str,
        at: float,
        conversation_id: str | None,
        answer: str | None,
    ) -> None:
        kept = self.state(run).outcomes
        row = list(kept.get(phone, _NO_OUTCOME))
        column = _FACT_AT[fact]
        row[column] = at if row[column] is None else row[column]
        row[1] = row[1] or conversation_id
        row[_ANSWER] = row[_ANSWER] or answer
        kept[phone] = tuple(row)  # type: ignore[assignment]

    async def launch_phones(
        self, run: str, state: str, launches: Collection[str]
    ) -> dict[str, list[str]]:
        return self.state(run).by_launch(state, launches)

    async def outcomes(self, run: str) -> list[RecipientOutcome]:
        kept = self.state(run).outcomes
        return [RecipientOutcome.of_row(phone, *row) for phone, row in sorted(kept.items())]

    async def outcome_groups(self, run: str) -> list[OutcomeGroup]:
        groups = Counter(
            (status, delivered is not None, read is not None, replied is not None, out is not None)
            for _, _, status, _, delivered, read, replied, _, out in self.state(
                run
            ).outcomes.values()
        )
        return [(*key, n) for key, n in groups.items()]

    # -- paused runs

    async def pause_run(self, run: str, reason: str, detail: str, paused: float) -> bool:
        if self._info(run) is None or run in self._pauses:
            return False
        self._pauses[run] = RunPause(reason, detail, paused)
        return True

    async def resume_run(self, run: str) -> bool:
        return self._pauses.pop(run, None) is not None

    async def judge_canary(self, run: str, judged: float) -> None:
        self._canaries.setdefault(run, judged)

    async def running_runs(self, states: Collection[str]) -> list[str]:
        running = []
        for name, state in self.runs_.items():
            info = state.info
            if info is None or info.stopped is not None or name in self._pauses:
                continue
            if not info.input_done or any(b.state in states and b.live for b in state.batches):
                running.append((info.created, name))
        return [name for _, name in sorted(running)]

    async def settled_recent(
        self, run: str, limit: int, final: Collection[str], failures: Collection[str]
    ) -> list[tuple[float, int, int]]:
        found = self.state(run)
        groups: list[tuple[float, int, int]] = [
            (when, 1, int(status in failures))
            for _, _, status, at, delivered, *_ in found.outcomes.values()
            if (status in final or delivered is not None)
            and (when := at if at is not None else delivered) is not None
        ]
        groups = sorted(groups, reverse=True)[:limit]
        groups += (
            (c.claimed, c.size, c.size) for c in found.claims.values() if c.state == REJECTED
        )
        return sorted(groups, reverse=True)

    def _held_anywhere(self, phone: str) -> Iterator[tuple[RunState, Batch]]:
        """Each run's batch holding ``phone``."""
        for found in self.runs_.values():
            number = found.index.get(found.key(phone))
            if number is not None:
                yield found, found.batch(number)

    async def contacted_in(
        self, run: str, chunk: str, state: str, since: float, states: Collection[str]
    ) -> list[str]:
        return [
            phone
            for phone in await self.phones_in(run, chunk, state)
            if any(
                batch.state in states
                and batch.updated >= since
                and not ((found.outcomes.get(phone) or _NO_OUTCOME)[6] or 0) >= batch.updated
                for found, batch in self._held_anywhere(phone)
            )
        ]

    async def answered_in(self, run: str, chunk: str, state: str, since: float) -> list[str]:
        return [
            phone
            for phone in await self.phones_in(run, chunk, state)
            if any(
                ((found.outcomes.get(phone) or _NO_OUTCOME)[6] or 0) >= since
                for found in self.runs_.values()
            )
        ]


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
