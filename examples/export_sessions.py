"""Export every session of a poll, page after page, to JSON Lines.

    python examples/export_sessions.py [out.jsonl] [days]

Sessions created in the last ``days`` (default 30) are written, one JSON
object per line. Without CAMPAIGNKIT_API_KEY an in-process sandbox with 3,000
extra sessions is used. The CLI does the same with
``campaignkit sessions POLL_ID --since 2025-01-01 -o out.jsonl``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

import orjson

from campaignkit.sandbox import client_or_sandbox


async def main() -> None:
    days = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0
    async with client_or_sandbox() as (client, sandbox):
        if sandbox is not None:
            print(
                f"(no CAMPAIGNKIT_API_KEY: using an in-process sandbox at {sandbox.root_url})",
                file=sys.stderr,
            )
        poll_id = os.environ.get("POLL_ID") or (await client.list_polls())[0].id
        end = int(time.time()) if sandbox is None else int(await sandbox.now())
        start = end - int(days * 86400)
        if sandbox is not None:
            await sandbox.add_sessions(int(poll_id), 3000, start=start, end=end)
        out = open(sys.argv[1], "wb") if len(sys.argv) > 1 else sys.stdout.buffer  # noqa: SIM115, ASYNC230
        count = 0
        try:
            async for session in client.iter_sessions(
                poll_id, start=start, end=end, page_size=1000
            ):
                record = {
                    "id": session.id,
                    "created_at": session.created_at,
                    "finished_at": session.finished_at,
                    "country_code": session.user.country_code,
                    "cellphone": session.user.cellphone,
                }
                out.write(orjson.dumps(record) + b"\n")
                count += 1
        finally:
            if out is not sys.stdout.buffer:
                out.close()
    print(f"exported {count} sessions of poll {poll_id}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
