"""A chat bot's view of a campaign: throttled progress messages.

Sends a campaign to the local sandbox and follows it with
``client.track(...)``, posting at most one progress message every
``--every`` seconds, plus a final summary, as a bot would post them to a
chat channel (here: printed)::

    python examples/progress_bot.py --users 500 --every 1

Every change of every deployment goes through the loop, but only the
campaign-level progress (``tracker.snapshot()``, in campaignkit's words) is posted:
a chat channel wants a handful of messages, not thousands.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

import campaignkit
from campaignkit import CampaignAck, CampaignClient, CampaignState, CampaignTracker, User
from campaignkit.sandbox import Sandbox

Post = Callable[[str], Awaitable[None]]


class Throttle:
    """True at most once per ``every`` seconds."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.clock = clock
        self.last: float | None = None

    def ready(self) -> bool:
        now = self.clock()
        if self.last is not None and now - self.last < self.every:
            return False
        self.last = now
        return True


def progress_message(tracker: CampaignTracker) -> str:
    """A bar of the people settled, then them per stage in campaignkit's
    words (``ProgressUpdate.summary``: sent is not delivered)."""
    update = tracker.snapshot()
    bar_width = 20
    filled = int(update.fraction * bar_width)  # full only when nobody is waiting
    return f"[{'#' * filled}{'-' * (bar_width - filled)}] {update.summary()}"


def summary_message(tracker: CampaignTracker) -> str:
    """The last message: every person counted (``ProgressUpdate.text``:
    each stage, each failure reason in words), then the tracker's work."""
    stats = tracker.stats
    text = tracker.snapshot().text()
    return (
        f"Campaign {tracker.launch_request_id}: {text}\n"
        f"  {stats.polls} status polls, {stats.retries} retried, {stats.changes} changes, "
        f"{stats.elapsed:.1f} s"
    )


async def follow(
    client: CampaignClient,
    ack: CampaignAck,
    *,
    every: float,
    post: Post,
    until: str = "done",
    timeout: float = 600.0,
) -> CampaignTracker:
    """Post throttled progress while the campaign runs, then a summary."""
    throttle = Throttle(every)

    async def on_state(state: CampaignState) -> None:
        # The request's state in words: DONE is not "everyone got it".
        await post(f"Campaign {ack.launch_request_id}: request {state.description}")

    tracker = client.track(
        ack,
        until=until,
        poll_interval=0.2,
        max_interval=2.0,
        timeout=timeout,
        on_state=on_state,
    )
    async with tracker:
        try:
            async for _change in tracker:
                if throttle.ready():
                    await post(progress_message(tracker))
        except campaignkit.TimeoutError:
            await post(f"Stopped following after {timeout:g} s: {tracker.snapshot().summary()}")
    await post(summary_message(tracker))
    return tracker


def campaign_users(count: int) -> list[User]:
    """Mostly ordinary numbers (delivered), some sandbox magic numbers
    (cellphones ending in 99NN end in status NN of the spec's table)."""
    users = []
    for i in range(count):
        if i % 10 == 7:
            magic = 3 + (i // 10) % 27  # 03-29: outcomes that settle
            cellphone = f"300{i:03d}99{magic:02d}"
        else:
            cellphone = f"300{i:07d}"
        users.append(User(cellphone=cellphone, country_code="+57", user_session_keys={"n": str(i)}))
    return users


async def main(users: int, every: float, speed: float, until: str, timeout: float) -> None:
    async def post(text: str) -> None:
        # A real bot would call its chat API here (Slack, Teams, WhatsApp...).
        print(f"bot> {text}", flush=True)

    async with Sandbox(speed=speed, seed=1) as sandbox, sandbox.client() as client:
        polls = await client.list_polls()
        try:
            ack = await client.send_campaign(polls[0].id, campaign_users(users))
        except campaignkit.CampaignKitError as exc:  # one line to the chat, never silence
            await post(f"Not sent: {' '.join(str(exc).split())}")
            return
        await post(f"Campaign queued for {users} users ({ack.launch_request_id})")
        await follow(client, ack, every=every, post=post, until=until, timeout=timeout)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--every", type=float, default=1.0, help="seconds between messages")
    parser.add_argument("--speed", type=float, default=1.0, help="sandbox clock speed")
    parser.add_argument("--until", choices=("done", "settled"), default="settled")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds followed at most")
    args = parser.parse_args()
    asyncio.run(main(args.users, args.every, args.speed, args.until, args.timeout))
