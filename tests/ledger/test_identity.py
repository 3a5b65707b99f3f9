"""Which ledger this is: an identity written once, when a ledger is created;
``create=False`` opens only a ledger that exists; a ledger deleted or
replaced under a running send stops it."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import asyncpg
import pytest
from helpers.ledgers import NewLedger, journal_of, people

from campaignkit import CampaignClient
from campaignkit.errors import LedgerError
from campaignkit.ledger import (
    Ledger,
    LedgerNotFound,
    MemoryLedger,
    PostgresLedger,
    SqliteLedger,
    ledger_from,
)
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(30)


async def test_a_ledger_keeps_its_identity_and_another_has_its_own(
    new_ledger: NewLedger, tmp_path: Path
) -> None:
    first = new_ledger()
    if not isinstance(first, MemoryLedger):  # whose contents, and identity, are the object's
        with pytest.raises(LedgerError, match="is not open"):
            first.identity  # noqa: B018 (read for its error)
    async with first:
        identity, created = first.identity, first.is_new
    async with new_ledger() as again:
        assert again.identity == identity
        assert not again.is_new or isinstance(again, MemoryLedger)
    assert created
    async with SqliteLedger(tmp_path / "another.db") as another:
        assert another.identity != identity
    assert len(identity) == 32


@pytest.mark.durable
async def test_create_false_refuses_a_ledger_that_does_not_exist(
    new_ledger: NewLedger, tmp_path: Path
) -> None:
    journal = journal_of(new_ledger())

    def existing() -> Ledger:
        return ledger_from(journal, create=False)

    with pytest.raises(LedgerNotFound, match="nothing was created") as refused:
        await existing().open()
    if journal.endswith(".db"):
        assert f"no ledger at '{journal}': the file does not exist" in str(refused.value)
        assert not os.listdir(tmp_path)  # nor a -wal or -shm
    else:
        assert "its schema 'ck_test_" in str(refused.value)
        assert "holds no campaignkit tables" in str(refused.value)
        assert not await campaignkit_tables(journal)
    async with new_ledger() as created:
        await created.start_run("spring", "1")
    async with existing() as opened:
        assert [info.run for info in await opened.runs()] == ["spring"]
        assert opened.identity == created.identity
        assert not opened.is_new


@pytest.mark.parametrize("content", [b"", b"country_code,cellphone\n+57,3001234567\n"])
async def test_create_false_refuses_a_file_that_is_no_ledger(
    tmp_path: Path, content: bytes
) -> None:
    """A --journal naming an empty file, or the users' CSV file: not a ledger,
    and left as it was."""
    path = tmp_path / "users.csv"
    path.write_bytes(content)
    with pytest.raises(LedgerNotFound, match="the file holds no campaignkit ledger"):
        await SqliteLedger(path, create=False).open()
    assert path.read_bytes() == content
    assert os.listdir(tmp_path) == ["users.csv"]


async def test_a_ledger_of_a_release_before_identities_gains_one(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    async with SqliteLedger(path) as ledger:
        await ledger.start_run("spring", "1")
    with closing(sqlite3.connect(path)) as conn:  # closed: 3.13 warns of one left open
        conn.execute("DROP TABLE campaignkit_ledger")
    async with SqliteLedger(path, create=False) as old:
        identity = old.identity
        assert not old.is_new
        assert [info.run for info in await old.runs()] == ["spring"]
    async with SqliteLedger(path, create=False) as again:
        assert again.identity == identity


async def test_a_postgres_ledger_made_again_under_a_claimer_stops_it(postgres_dsn: str) -> None:
    """A schema dropped and created again while a sender has it open is
    another ledger: the next claim refuses it, sending nothing."""
    async with PostgresLedger(postgres_dsn) as ledger:
        await ledger.start_run("spring", "1")
        await ledger.plan("spring", "c1", people(3))
        conn = await asyncpg.connect(postgres_dsn)
        try:
            for table in await campaignkit_tables(postgres_dsn):
                await conn.execute(f"DROP TABLE {table}")
        finally:
            await conn.close()
        async with PostgresLedger(postgres_dsn) as remade:
            await remade.start_run("spring", "1")
            await remade.plan("spring", "c1", people(3))
            replacing = remade.identity
        with pytest.raises(LedgerError, match="was replaced while in use") as stopped:
            await ledger.claim("spring", "c1")
        assert f"now holds ledger {replacing}" in str(stopped.value)
        assert f"opened as ledger {ledger.identity}" in str(stopped.value)
    async with PostgresLedger(postgres_dsn) as remade:
        assert (await remade.counts("spring"))["planned"] == 3


async def campaignkit_tables(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_name LIKE 'campaignkit%'"
        )
    finally:
        await conn.close()
    return [row[0] for row in rows]


USERS = 600


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_ledger_file_deleted_or_replaced_under_a_send_stops_it(
    sb: Sandbox, client: CampaignClient, tmp_path: Path, how: str
) -> None:
    """Before: the send went on into the lost file, and a rerun (on a new
    file) sent all 600 again. Now the next transaction after it stops the send."""
    path = tmp_path / "run.db"
    poll = (await client.list_polls())[0].id
    other = tmp_path / "other.db"
    async with SqliteLedger(other):
        pass
    await sb.set_faults(
        {"kind": "latency", "seconds": 0.05, "route": "send_campaign", "when": "after"}
    )

    async def lose_the_file_once_a_chunk_is_in() -> None:
        for _ in range(1000):
            if await received(sb):
                break
            await asyncio.sleep(0.01)
        if how == "deleted":
            path.unlink()
        else:
            os.replace(other, path)

    users = [{"country_code": "+57", "cellphone": f"300{n:07d}"} for n in range(USERS)]
    losing = asyncio.create_task(lose_the_file_once_a_chunk_is_in())
    with pytest.raises(LedgerError, match=f"was {how} while in use") as stopped:
        await client.send_bulk(poll, users, chunk_size=50, concurrency=1, journal=path)
    await losing
    assert f"the ledger file '{path}'" in str(stopped.value)
    sent = await received(sb)
    assert set(sent.values()) == {1}
    assert len(sent) <= 100  # the chunk(s) under way when it was lost, no more


async def received(sb: Sandbox) -> dict[str, int]:
    counts: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    return counts
