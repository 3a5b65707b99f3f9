"""What a recipient of an SQL ledger holds (schema 3), as every statement
of :mod:`._sql_tx` and :mod:`._sql` reads it.

A claim writes no recipient: its chunk's row names it
(``campaignkit_chunks.claim``, what makes two claims of a chunk wait for
each other) and the claim's own row holds what became of its recipients
(state, launch, detail, when). A recipient's row says ``planned`` while the
claim of its chunk is open or settled: what a recipient *is* is its row's,
unless its row is planned and a claim of its chunk is not put back to
planned: then that claim's (:func:`held_joins`, :func:`held_as`). A chunk
has one such claim at most, and a claim of schema 2 (which moved its
recipients' rows, as its moves still do) left no planned row in its chunk.
So a plan writes each recipient once, a claim and a settle a row each
(benchmarks, row 17).

A claim reads its chunk's planned rows (``phones_in``, ``listed_in``...)
holding the chunk (:meth:`~._sql_tx.SqlTx.hold_chunk`), when they are what
they say.
"""

from __future__ import annotations

from typing import Final


def held_joins(r: str) -> str:
    """The join of recipients ``r`` (an alias of ``campaignkit_recipients``)
    to the claim holding their chunk, ``{r}c``: only for a planned row. A
    chunk has one claim at most not put back to planned (its row names it),
    and a claim of schema 2 left no planned row in its chunk."""
    return (
        f" LEFT JOIN campaignkit_claims {r}c ON {r}.state = 'planned'"
        f" AND {r}c.run = {r}.run AND {r}c.chunk = {r}.chunk AND {r}c.state <> 'planned'"
    )


def held_as(r: str, column: str) -> str:
    """What recipient ``r`` holds in ``column`` (``state``, ``claim``,
    ``launch_request_id``, ``detail``, ``updated``): its row's, or its
    chunk's claim's (with :func:`held_joins`)."""
    return f"CASE WHEN {r}c.claim IS NULL THEN {r}.{column} ELSE {r}c.{column} END"


def record_columns(r: str) -> str:
    """A :class:`Record` of recipient ``r`` (with :func:`held_joins`)."""
    held = ", ".join(held_as(r, column) for column in ("state", "launch_request_id", "detail"))
    return f"{r}.phone, {r}.position, {held}, {r}.user_wire, {held_as(r, 'claim')}"


REPLAN: Final = (
    "ON CONFLICT (run, phone) DO UPDATE SET chunk = excluded.chunk,"
    " position = excluded.position, user_wire = excluded.user_wire,"
    " state = excluded.state, claim = NULL, detail = excluded.detail, updated = excluded.updated"
    " WHERE campaignkit_recipients.state IN {replace} AND (campaignkit_recipients.state"
    " <> 'planned' OR campaignkit_recipients.chunk IN {free})"
)
"""A plan's conflict clause: a recipient the run holds in a state of
``{replace}`` joins the plan's chunk, unless it is planned in a chunk not
``{free}`` (held by a claim: see ``SqlTx._chunks_free``)."""

UNPLANNED: Final = (
    " FROM campaignkit_recipients r"
    " WHERE r.run = ? AND r.state <> 'planned' AND r.state IN {states}"
)
"""The rows ``r`` of a run in one of ``{states}`` (none ``planned``), through
their partial index: SQLite uses it only with ``state <> 'planned'`` written
so and the states as a list."""

CHUNK_HELD: Final = "SELECT 1 FROM campaignkit_claims c WHERE c.state <> 'planned'"
"""A claim holding its chunk (with ``AND c.run = ... AND c.chunk = ...``):
none of the chunk's planned rows is planned."""


# Run by run, newest first, each a lookup of the recipients' primary key: no
# index of phones across runs, and few runs beside many recipients (a join
# let SQLite scan every recipient of every run).
RUN_OF_PHONE: Final = (
    "SELECT u.run FROM campaignkit_runs u WHERE EXISTS (SELECT 1"
    f" FROM campaignkit_recipients r{held_joins('r')} WHERE r.run = u.run AND r.phone = ?"
    f" AND {held_as('r', 'state')} = ?) ORDER BY u.created DESC, u.run DESC LIMIT 1"
)
"""The most recent run holding a phone in a state."""
# Recipients taken by a claim made after a time, in some states (``{states}``):
# each claim's found through its chunk (the recipients' one secondary index):
# the planned rows of its chunk (see held_joins), or (schema 2) the rows
# naming it. CROSS JOIN: SQLite reads the claims first (PostgreSQL plans it
# freely).
TAKEN: Final = (
    " FROM campaignkit_claims c CROSS JOIN campaignkit_recipients r"
    " WHERE r.run = c.run AND r.chunk = c.chunk AND c.claimed > ? AND (r.state = 'planned'"
    " AND c.state IN {states} OR r.claim = c.claim AND r.state IN {states})"
)

RECORD: Final = "r.phone, r.position, r.state, r.launch_request_id, r.detail, r.user_wire, r.claim"
"""A :class:`~._records.Record` of a row ``r`` that holds what it says."""
CLAIMED_RECORD: Final = (
    "r.phone, r.position, c.state, c.launch_request_id, c.detail, r.user_wire, c.claim"
)
"""A :class:`~._records.Record` of a row ``r`` of :data:`CLAIMED_ROWS`."""
CLAIMED_ROWS: Final = (
    " FROM campaignkit_claims c JOIN campaignkit_recipients r ON r.run = c.run"
    " AND r.chunk = c.chunk AND r.state = 'planned' WHERE c.run = ?"
)
"""The recipients ``r`` of a run's claims ``c`` that hold their chunk (add
``AND c.state ...``: a claim put back to planned holds none)."""
