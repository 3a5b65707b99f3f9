"""A process claiming chunks of one run, for the multi-process claim test of
tests/ledger/test_ledger.py.

``python ledger_claimer.py JOURNAL RUN SEED CHUNK...`` opens the ledger
(an SQLite path or a PostgreSQL DSN), prints ``ready``, waits for a line on
stdin (so that every process races from the same moment), claims the chunks
in an order shuffled by SEED, and prints ``{chunk: [phone, ...]}`` as JSON
for the claims it won.
"""

from __future__ import annotations

import asyncio
import random
import sys

import orjson

from campaignkit.ledger import ledger_from


async def main(journal: str, run: str, seed: int, chunks: list[str]) -> None:
    random.Random(seed).shuffle(chunks)
    won: dict[str, list[str]] = {}
    async with ledger_from(journal) as ledger:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        for chunk in chunks:
            claim = await ledger.claim(run, chunk, owner=f"claimer-{seed}")
            if claim is not None:
                won[chunk] = [r.phone for r in claim.recipients]
    sys.stdout.write(orjson.dumps(won).decode())


if __name__ == "__main__":
    journal, run, seed, *chunks = sys.argv[1:]
    asyncio.run(main(journal, run, int(seed), chunks))
