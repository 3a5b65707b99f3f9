"""Send a campaign and follow every deployment's status live.

    python examples/send_and_track.py

Against the real service, set CAMPAIGNKIT_API_KEY / CAMPAIGNKIT_BASE_URL /
CAMPAIGNKIT_CAMPAIGN_URL (and POLL_ID); without them the example starts its
own in-process sandbox, where cellphones ending 99NN end in status NN.
"""

from __future__ import annotations

import asyncio
import os

from campaignkit import User
from campaignkit.sandbox import client_or_sandbox


async def main() -> None:
    async with client_or_sandbox(speed=20) as (client, sandbox):
        if sandbox is not None:
            print(f"(no CAMPAIGNKIT_API_KEY: using an in-process sandbox at {sandbox.root_url})")
        poll_id = os.environ.get("POLL_ID") or (await client.list_polls())[0].id
        users = [
            User(cellphone="3001234501", country_code="+57", user_session_keys={"name": "Ana"}),
            User(cellphone="3001234502", country_code="+57", user_session_keys={"name": "Bo"}),
            User(cellphone="3001239908", country_code="+57", user_session_keys={"name": "Cy"}),
            User(cellphone="3001239914", country_code="+57", user_session_keys={"name": "Di"}),
            User(cellphone="3001239905", country_code="+57", user_session_keys={"name": "Ed"}),
        ]
        ack = await client.send_campaign(poll_id, users)
        print(f"queued: launch_request_id={ack.launch_request_id}")

        tracker = client.track(ack, until="settled", poll_interval=0.5, timeout=120)
        async with tracker:
            async for change in tracker:
                was = change.previous.value if change.previous else "-"
                print(f"  {change.deployment.cellphone}: {was} -> {change.current.value}")
        print(f"campaign {tracker.state}: {tracker.progress.summary()}")
        for status, count in tracker.counts.most_common():
            print(f"  {status}: {count}")


if __name__ == "__main__":
    asyncio.run(main())
