"""The schema made or brought up to date when a ledger opens
(:func:`create_schema`): ledgers written before people were keyed by their
:class:`Phone` are re-keyed, and every promise they hold is kept under the
new keys.

Earlier releases filed a person as the country code and the cellphone's
digits as given, so one person could be there twice (``+4407700900123`` and
``+447700900123``) and a suppressed number be missed in another form. Each
stored phone is read again; where two rows become one person, the one that
says more is kept: a recipient who was sent to (or whose sending is unknown)
over one merely planned, so nobody of a run is sent again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import orjson

from .._input.phones import Phone, read_text
from ..errors import LedgerError
from ._schema import ADDED_COLUMNS, SCHEMA, SCHEMA_VERSION, Transaction

_WEIGHT: Final = {
    state: weight
    for weight, state in enumerate(
        ("planned", "deferred", "suppressed", "rejected", "in_flight", "ambiguous", "accepted")
    )
}
"""Which of two rows of one person a run keeps: the heavier state."""

_FACTS: Final = (
    "launch_request_id",
    "conversation_id",
    "status",
    "status_at",
    "delivered_at",
    "read_at",
    "replied_at",
    "answer",
    "opted_out_at",
)


def _phones(stored: Iterable[str | None]) -> dict[str, Phone]:
    """The stored phones whose key is another now, with their :class:`Phone`."""
    changed: dict[str, Phone] = {}
    for phone in set(stored):
        if phone is None:
            continue
        read = read_text(phone)
        if isinstance(read, Phone) and read.key != phone:
            changed[phone] = read
    return changed


async def rekey_phones(tx: Transaction) -> None:
    """Re-key every table that files people by phone."""
    await _recipients(tx)
    await _outcomes(tx)
    await _by_phone(tx, "campaignkit_suppressions")
    await _lines(tx)
    rows = await tx.fetch("SELECT DISTINCT phone FROM campaignkit_skipped")
    for old, phone in _phones(row[0] for row in rows).items():
        await tx.execute("UPDATE campaignkit_skipped SET phone = ? WHERE phone = ?", phone.key, old)


async def _recipients(tx: Transaction) -> None:
    rows = await tx.fetch("SELECT run, phone, state, user_wire FROM campaignkit_recipients")
    changed = _phones(row[1] for row in rows)
    if not changed:
        return
    states = {(run, phone): state for run, phone, state, _ in rows}
    for run, old, state, wire in rows:
        phone = changed.get(old)
        if phone is None:
            continue
        kept = states.get((run, phone.key))
        if kept is not None and _WEIGHT.get(kept, 0) >= _WEIGHT.get(state, 0):
            await tx.execute(
                "DELETE FROM campaignkit_recipients WHERE run = ? AND phone = ?", run, old
            )
            continue
        if kept is not None:
            await tx.execute(
                "DELETE FROM campaignkit_recipients WHERE run = ? AND phone = ?", run, phone.key
            )
        user = orjson.loads(wire)
        # Planned ones go on the wire as the service should get them.
        user["country_code"], user["cellphone"] = phone.country_code, phone.cellphone
        await tx.execute(
            "UPDATE campaignkit_recipients SET phone = ?, user_wire = ?"
            " WHERE run = ? AND phone = ?",
            phone.key,
            orjson.dumps(user).decode(),
            run,
            old,
        )
        states[(run, phone.key)] = state


async def _outcomes(tx: Transaction) -> None:
    rows = await tx.fetch("SELECT run, phone FROM campaignkit_outcomes")
    changed = _phones(row[1] for row in rows)
    held = {(run, phone) for run, phone in rows}
    for run, old in rows:
        phone = changed.get(old)
        if phone is None:
            continue
        if (run, phone.key) in held:
            # Both forms heard of: each fact the kept row lacks is taken.
            merged = ", ".join(
                f"{fact} = COALESCE({fact}, (SELECT {fact} FROM campaignkit_outcomes "
                "WHERE run = ? AND phone = ?))"
                for fact in _FACTS
            )
            await tx.execute(
                f"UPDATE campaignkit_outcomes SET {merged} WHERE run = ? AND phone = ?",
                *[value for _ in _FACTS for value in (run, old)],
                run,
                phone.key,
            )
            await tx.execute(
                "DELETE FROM campaignkit_outcomes WHERE run = ? AND phone = ?", run, old
            )
        else:
            await tx.execute(
                "UPDATE campaignkit_outcomes SET phone = ? WHERE run = ? AND phone = ?",
                phone.key,
                run,
                old,
            )
            held.add((run, phone.key))


async def _by_phone(tx: Transaction, table: str) -> None:
    """Re-key a table with one row per phone: the row already under the new
    key is kept."""
    rows = await tx.fetch(f"SELECT phone FROM {table}")
    held = {row[0] for row in rows}
    for old, phone in _phones(held).items():
        if phone.key in held:
            await tx.execute(f"DELETE FROM {table} WHERE phone = ?", old)
        else:
            await tx.execute(f"UPDATE {table} SET phone = ? WHERE phone = ?", phone.key, old)
            held.add(phone.key)


async def _lines(tx: Transaction) -> None:
    """Re-key the sticky lines: a person filed twice keeps one line, and the
    other line's head count drops by one."""
    rows = await tx.fetch("SELECT phone, line FROM campaignkit_lines")
    lines = dict(rows)
    for old, phone in _phones(lines).items():
        if phone.key in lines:
            await tx.execute("DELETE FROM campaignkit_lines WHERE phone = ?", old)
            await tx.execute(
                "UPDATE campaignkit_line_load SET people = people - 1 WHERE line = ?", lines[old]
            )
        else:
            await tx.execute(
                "UPDATE campaignkit_lines SET phone = ? WHERE phone = ?", phone.key, old
            )
            lines[phone.key] = lines[old]


async def create_schema(tx: Transaction) -> bool:
    """Create the tables if missing, re-key an older ledger's phones; refuse
    a schema newer than this code. Whether the ledger is new (it had no schema)."""
    for statement in SCHEMA:
        await tx.execute(statement)
    rows = await tx.fetch("SELECT version FROM campaignkit_schema")
    if not rows:
        await tx.execute("INSERT INTO campaignkit_schema (version) VALUES (?)", SCHEMA_VERSION)
        return True
    if rows[0][0] < SCHEMA_VERSION:
        if rows[0][0] < 2:
            await rekey_phones(tx)
        for table, column in ADDED_COLUMNS:
            if column.split()[0] not in await tx.columns(table):
                await tx.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
        await tx.execute("UPDATE campaignkit_schema SET version = ?", SCHEMA_VERSION)
    elif rows[0][0] > SCHEMA_VERSION:
        raise LedgerError(
            f"the ledger's schema is version {rows[0][0]}, newer than this campaignkit "
            f"reads ({SCHEMA_VERSION}): upgrade campaignkit"
        )
    return False
