"""A chunk the service accepted is settled accepted although the ledger
stayed unreachable for longer than its own ``reconnect_timeout`` while it
was being settled (shorter than the claim's life): before, the settle
failed, the ack was lost and the claim was reported ambiguous once it
expired. On the real PostgreSQL, made unreachable for this test's
connections only by cutting a proxy in front of it."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import pytest
from helpers.bulk_child import make_users
from helpers.proxy import cuttable_proxy

from campaignkit.ledger import ACCEPTED, PostgresLedger
from campaignkit.sandbox import Sandbox
from campaignkit.workers import send_chunk, submit_run

pytestmark = pytest.mark.timeout(60)


def through(dsn: str, port: int) -> str:
    """``dsn``, connecting to ``127.0.0.1:port`` instead."""
    parts = urlsplit(dsn)
    user, at, _ = parts.netloc.rpartition("@")
    return parts._replace(netloc=f"{user}{at}127.0.0.1:{port}").geturl()


async def test_an_accepted_chunk_is_settled_accepted_after_a_long_ledger_outage(
    sb: Sandbox, postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Each request is processed, then answered 1 s later: the outage starts meanwhile.
    await sb.set_faults(
        {"kind": "latency", "seconds": 1.0, "route": "send_campaign", "when": "after"}
    )
    server = urlsplit(postgres_dsn)
    chunks: list[str] = []

    async def enqueue(run: str, chunk: str) -> None:
        chunks.append(chunk)

    async with (
        cuttable_proxy(server.hostname or "127.0.0.1", server.port or 5432) as proxy,
        PostgresLedger(postgres_dsn) as producer,
        sb.client() as client,
    ):
        poll = (await client.list_polls())[0].id
        run = await submit_run(producer, poll, make_users(50), enqueue=enqueue, chunk_size=50)
        worker_ledger = PostgresLedger(through(postgres_dsn, proxy.port), claim_ttl=30)
        worker_ledger.reconnect_timeout = 0.3
        async with worker_ledger:
            sending = asyncio.create_task(send_chunk(client, worker_ledger, run, chunks[0]))
            deadline = time.monotonic() + 20
            while not (await sb.snapshot())["companies"][0]["phone_counts"]:
                assert time.monotonic() < deadline
                assert not sending.done()
                await asyncio.sleep(0.02)
            await proxy.cut()
            # Cut until the ledger's own retries gave up settling (after its
            # reconnect_timeout and a last pause of up to 5 s), within the claim's life.
            while "settling claim" not in caplog.text and not sending.done():
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            await proxy.restore()
            result = await asyncio.wait_for(sending, 30)
        assert result is not None
        assert result.outcome == "accepted"
        states = {record.state async for record in producer.records(run)}
        claims = await producer.claims(run)
    assert states == {ACCEPTED}
    assert [claim[2] for claim in claims] == [ACCEPTED]
    assert "expired before it was settled" not in caplog.text
