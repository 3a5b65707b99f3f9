"""Send a large CSV of users in chunks, resumably.

    python examples/bulk_from_csv.py [users.csv] [journal.sqlite]

CSV columns: country_code, cellphone, optional deployment_eta; every other
column is a session variable. Re-run with the same journal after a crash: the
accepted chunks are not sent again, ambiguous ones are reported, not resent.
Without a CSV a file of 2,000 users is generated; without CAMPAIGNKIT_API_KEY
an in-process sandbox is used.
"""

from __future__ import annotations

import asyncio
import csv
import os
import sys
import tempfile
from pathlib import Path

from campaignkit import ProgressUpdate
from campaignkit.bulk import users_from_csv
from campaignkit.sandbox import client_or_sandbox


def sample_csv(path: Path, count: int = 2000) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["country_code", "cellphone", "name"])
        for i in range(count):
            writer.writerow(["+57", f"300{i:07d}", f"Customer {i}"])
        writer.writerow(["+57", "300 999", "too short a number"])  # reported invalid
    return path


def show(progress: ProgressUpdate) -> None:
    print(f"  {progress.summary()}")


async def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="campaignkit-bulk-"))
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else sample_csv(workdir / "users.csv")
    journal = Path(sys.argv[2]) if len(sys.argv) > 2 else workdir / "journal.sqlite"
    async with client_or_sandbox(speed=20) as (client, sandbox):
        if sandbox is not None:
            print(f"(no CAMPAIGNKIT_API_KEY: using an in-process sandbox at {sandbox.root_url})")
        poll_id = os.environ.get("POLL_ID") or (await client.list_polls())[0].id
        report = await client.send_bulk(
            poll_id,
            users_from_csv(source),
            chunk_size=500,
            concurrency=4,
            journal=journal,
            on_progress=show,
        )
    print(report)
    print(f"counts: {report.counts}")
    for item in report.invalid:
        print(f"  invalid: {item.reason}")
    print(f"launch request ids: {len(report.launch_request_ids)} (journal: {journal})")
    if not report.complete:
        sys.exit(1)


if __name__ == "__main__":
    asyncio.run(main())
