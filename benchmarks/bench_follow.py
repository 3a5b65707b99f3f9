"""Row 15: following a run of 100,000 recipients (100 launches of 1,000):
the outcomes written into the ledger by ``follow`` (read the run's launches,
track each until it settles, match each deployment to its recipient, write
the statuses in bulk), as a throughput ratio to consuming the same tracker
streams without writing anything. One row per ledger (memory, SQLite).

Both sides run the same trackers, 8 launches at a time, through a status
source that answers each launch from bytes, each deployment walking the
sandbox's own path of statuses one step a poll (``RECEIVED``,
``RECEIVED_BY_WORKER``, then ``SUCCESS`` or a failure, where the launch has
settled): the row measures the follow, not the loopback. Each SDK round
follows a fresh run (planned and accepted in the ledger outside the
timing), so every round writes all 100,000 outcomes. Times are this
process's CPU time (the SQLite ledger's thread included): the machine's
cores are shared, and wall time swings with other work on them.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import orjson

from campaignkit import ClientConfig, DeploymentStatus
from campaignkit._wire.sansio import Decode, Request, read_response
from campaignkit.bulk._follow import follow_launches, follow_open
from campaignkit.ledger import ACCEPTED, Ledger, MemoryLedger, Recipient, SqliteLedger
from campaignkit.models import CampaignAck
from campaignkit.sandbox._outcomes import DEFAULT_OUTCOME, OUTCOMES, STATUSES
from campaignkit.tracker import TrackOptions

from ._harness import Row, Timing, throughput_ratio

T = TypeVar("T")
# Eight in ten delivered, the others failing two ways: each one's path of statuses.
PATHS = tuple(
    OUTCOMES[i].timeline
    for i in (
        *[DEFAULT_OUTCOME] * 8,
        STATUSES.index(DeploymentStatus.FAILURE_BY_UNABLE_TO_CONTACT),
        STATUSES.index(DeploymentStatus.FAILURE_BY_OPTOUT_CONTACT),
    )
)
STEPS = max(len(path) for path in PATHS)
OPTIONS = TrackOptions("settled", poll_interval=0.001, max_interval=0.001)
CONCURRENCY = 8


def launch_id(launch: int) -> str:
    return f"launch-{launch:04d}"


def cellphone(launch: int, user: int) -> str:
    return f"300{launch:03d}{user:04d}"


def body(launch: int, size: int, step: int) -> bytes:
    """The launch's answer at its ``step``-th poll."""
    paths = [PATHS[user % len(PATHS)] for user in range(size)]
    deployments = [
        {
            "conversation_id": f"conv-{launch}-{user}",
            "service_id": f"svc-{launch}-{user}",
            "cellphone": cellphone(launch, user),
            "status": path[min(step, len(path) - 1)],
        }
        for user, path in enumerate(paths)
    ]
    return orjson.dumps(
        {
            "launch_request_id": launch_id(launch),
            "status": "DONE",
            "poll_id": 4821,
            "deployments": deployments,
        }
    )


class _Launches:
    """A status source (the client's transport, as a tracker polls it) that
    answers each launch from bytes, one step further at each poll."""

    def __init__(self, answers: dict[str, list[bytes]]) -> None:
        self.config = ClientConfig("sk_bench_follow", campaign_url="http://127.0.0.1:9")
        self.transport = self  # what follow_open takes a client for
        self.answers = answers
        self.polls: dict[str, int] = {}

    def clock(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)

    async def attempt(self, request: Request, decode: Decode[T], timeout: float | None) -> T:
        launch = request.url.rsplit("/", 1)[-1]
        step = self.polls[launch] = self.polls.get(launch, -1) + 1
        answer = self.answers[launch][min(step, STEPS - 1)]
        headers = {"Content-Type": "application/json"}
        return read_response(request, 200, headers, answer, decode)


def acks(launches: int) -> list[CampaignAck]:
    return [
        CampaignAck("ok", str(n), str(n), launch_id(n), f"/v2/send-campaign/{launch_id(n)}")
        for n in range(launches)
    ]


async def accepted_run(ledger: Ledger, run: str, launches: int, size: int) -> None:
    """A run whose every recipient the service accepted, one launch per chunk."""
    await ledger.start_run(run, "4821")
    for ack in acks(launches):
        n = int(ack.id)
        chunk = f"{run}/{n}"
        recipients = [
            Recipient(f"+57{cellphone(n, user)}", n * size + user, "{}") for user in range(size)
        ]
        # The same people each round: those an earlier round's opt-outs listed go too.
        await ledger.plan(run, chunk, recipients, ignore_suppression=True)
        claim = await ledger.claim(run, chunk)
        assert claim is not None
        ack_json = orjson.dumps(attrs.asdict(ack)).decode()
        await ledger.settle(
            run, claim.token, ACCEPTED, launch_request_id=ack.launch_request_id, ack=ack_json
        )


async def alternate(
    consume: Callable[[], Awaitable[object]],
    follow: Callable[[str], Awaitable[object]],
    prepare: Callable[[str], Awaitable[None]],
    rounds: int,
) -> tuple[Timing, Timing]:
    """Consuming and following alternately; each follow on a run prepared untimed."""
    floor: list[float] = []
    sdk: list[float] = []
    for index in range(rounds):
        started = time.process_time()
        await consume()
        floor.append(time.process_time() - started)
        run = f"run-{index}"
        await prepare(run)
        started = time.process_time()
        await follow(run)
        sdk.append(time.process_time() - started)
    return Timing.of(floor), Timing.of(sdk)


async def measure(name: str, ledger: Ledger, launches: int, size: int, rounds: int) -> Row:
    total = launches * size
    all_acks = acks(launches)
    answers = {
        launch_id(n): [body(n, size, step) for step in range(STEPS)] for n in range(launches)
    }

    async def consume() -> None:
        source = _Launches(answers)
        await follow_launches(source, None, "", all_acks, {}, OPTIONS, CONCURRENCY)

    async def follow(run: str) -> None:
        source = _Launches(answers)
        client: Any = source
        await follow_open(client, ledger, run, OPTIONS, CONCURRENCY)

    async def prepare(run: str) -> None:
        await accepted_run(ledger, run, launches, size)

    async with ledger:
        floor, sdk = await alternate(consume, follow, prepare, rounds)
        funnel = await ledger.funnel(f"run-{rounds - 1}")
    assert funnel.accepted == total, funnel
    assert sum(funnel.failed.values()) == total // 5, funnel
    return throughput_ratio(
        f"15 follow a run of {total:,} recipients ({launches} launches), outcomes written "
        f"into the {name} ledger, vs consuming the same tracker streams",
        floor,
        sdk,
        0.8,
        notes=f"({total / sdk.median:,.0f} outcomes/s written)",
        figures={"outcomes": total, "outcomes_per_s": total / sdk.median},
    )


def run(quick: bool) -> list[Row]:
    launches, size, rounds = (10, 100, 2) if quick else (100, 1000, 3)
    rows = [asyncio.run(measure("memory", MemoryLedger(), launches, size, rounds))]
    with tempfile.TemporaryDirectory() as directory:
        sqlite = SqliteLedger(Path(directory) / "follow.db")
        rows.append(asyncio.run(measure("SQLite", sqlite, launches, size, rounds)))
    return rows
