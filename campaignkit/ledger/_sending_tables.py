"""The tables of the sending-line rules (:mod:`._sending_sql`), created with the
ledger's own."""

from __future__ import annotations

from typing import Final

TABLES: Final = (
    """CREATE TABLE IF NOT EXISTS campaignkit_run_options (
        run TEXT PRIMARY KEY,
        options TEXT NOT NULL,
        saved DOUBLE PRECISION NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS campaignkit_lines (
        phone TEXT PRIMARY KEY,
        line TEXT NOT NULL,
        assigned DOUBLE PRECISION NOT NULL
    )""",
    # The people on each line, kept beside campaignkit_lines so that a new
    # person's line is chosen without counting everyone ever assigned.
    """CREATE TABLE IF NOT EXISTS campaignkit_line_load (
        line TEXT PRIMARY KEY,
        people INTEGER NOT NULL
    )""",
    # One row per rule that needs every claimer of the ledger in turn; the
    # row's lock is held to the end of the transaction (SQLite's BEGIN
    # IMMEDIATE already serialises writers).
    """CREATE TABLE IF NOT EXISTS campaignkit_locks (
        name TEXT PRIMARY KEY,
        taken DOUBLE PRECISION NOT NULL
    )""",
)
