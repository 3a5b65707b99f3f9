"""Row 2: one tracker poll of a 100,000-deployment campaign with 5% changed
(decode + diff + yield), as a ratio to ``orjson.loads`` of the same bytes;
the tracker's CPU per poll at 1,000 / 10,000 / 100,000. Row 11: the CPU an
``updates()`` snapshot adds to that poll.

The SDK side is a real :class:`CampaignTracker` driven through ``__anext__``
(tenacity step, decode of the bytes with the wire layer, diff, one
``DeploymentChange`` per changed deployment); only the socket is replaced by
a status source that hands over the bytes, so the row measures the tracker,
not the loopback (rows 3/4 measure that).
"""

from __future__ import annotations

import asyncio
import gc
import time
from typing import Any, TypeVar

import orjson

from campaignkit import CampaignTracker, ClientConfig
from campaignkit._wire.sansio import Decode, Request, read_response
from campaignkit.tracker import TrackOptions

from ._harness import Row, Timing, time_ratio

STATUSES = ("RECEIVED", "RECEIVED_BY_WORKER", "RETRY", "SUCCESS", None)
CHANGED_TO = {
    "RECEIVED": "RECEIVED_BY_WORKER",
    "RECEIVED_BY_WORKER": "SUCCESS",
    "RETRY": "FAILURE",
    "SUCCESS": "DELIVERED",
    None: "RECEIVED",
}
LAUNCH = "5f0c7a9e-8d2b-4c41-9a57-3e1f2b6d8c10"


def status_bodies(size: int, changed_share: float = 0.05) -> tuple[bytes, bytes, int]:
    """Two consecutive answers (bytes) of ``size`` deployments; the second
    has ``changed_share`` of them moved one status forward."""
    before = []
    for i in range(size):
        before.append(
            {
                "conversation_id": f"{LAUNCH}-{i:06d}",
                "service_id": f"svc-4821-{i:06d}",
                "cellphone": f"57300{i:07d}",
                "business_scope_id": "bs-7f3a9c21",
                "username": f"user{i}",
                "status": STATUSES[i % len(STATUSES)],
            }
        )
    step = max(1, round(1 / changed_share))
    after = [dict(entry) for entry in before]
    changed = 0
    for i in range(0, size, step):
        after[i]["status"] = CHANGED_TO[after[i]["status"]]
        changed += 1

    def body(deployments: list[dict[str, Any]]) -> bytes:
        return orjson.dumps(
            {
                "launch_request_id": LAUNCH,
                "status": "CLAIMED",
                "poll_id": 4821,
                "deployments": deployments,
            }
        )

    return body(before), body(after), changed


_now = time.process_time
T = TypeVar("T")


class _BytesSource:
    """Stands in for the client's transport (a ``StatusSource``): the
    answer's bytes, read by the wire layer exactly as after a real exchange."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.config = ClientConfig("sk_bench_tracker", campaign_url="http://127.0.0.1:9")

    def clock(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        pass

    async def attempt(self, request: Request, decode: Decode[T], timeout: float | None) -> T:
        return read_response(request, 200, {"Content-Type": "application/json"}, self.body, decode)


class PollBench:
    """Trackers primed with the first answer, each ready for one timed poll."""

    def __init__(self, size: int) -> None:
        self.before, self.after, self.changed = status_bodies(size)
        self.loop = asyncio.new_event_loop()
        self.checkpoint = self._prime()

    def _tracker(self, source: _BytesSource, resume: dict[str, Any] | None) -> CampaignTracker:
        return CampaignTracker(source, LAUNCH, TrackOptions(poll_interval=0.001), resume=resume)

    async def _drain(self, tracker: CampaignTracker, count: int) -> int:
        seen = 0
        for _ in range(count):
            change = await anext(tracker)
            seen += change.current is not None
        return seen

    def _prime(self) -> dict[str, Any]:
        tracker = self._tracker(_BytesSource(self.before), None)
        total = orjson.loads(self.before)["deployments"]
        with_status = sum(1 for d in total if d["status"] is not None)
        self.loop.run_until_complete(self._drain(tracker, with_status))
        return tracker.checkpoint()

    def ready(self) -> CampaignTracker:
        """A tracker in the steady state after the first answer (built outside
        the timing): its statuses restored, and holding the previous answer
        (one poll of it, which changes nothing), which the timed poll replaces
        (and frees), as a long-running tracker does on every poll."""
        source = _BytesSource(self.before)
        tracker = self._tracker(source, self.checkpoint)

        async def hold_previous_answer() -> None:
            assert await tracker.prepare_poll()
            await tracker.poll()
            assert tracker.take_changes() == []

        self.loop.run_until_complete(hold_previous_answer())
        source.body = self.after
        return tracker

    def poll(self, tracker: CampaignTracker) -> None:
        """One poll: decode + diff + yield every change."""
        seen = self.loop.run_until_complete(self._drain(tracker, self.changed))
        assert seen == self.changed

    def close(self) -> None:
        self.loop.close()


def alternate(bench: PollBench, rounds: int) -> tuple[Timing, Timing, Timing]:
    """Floor and SDK alternately (A B A B ...).

    Each SDK round polls a fresh steady-state tracker, set up and dropped
    outside the timed region. The floor parses the same bytes while that
    tracker is alive, so both parse with the same memory in use (holding a
    decoded 100,000-deployment answer slows a parse by a third on this
    machine, whoever holds it). ``clean`` is the floor with nothing held: the
    issue's floor, which the row's ratio uses.
    Times are this process's CPU time (``time.process_time``, user + system,
    so page faults count): the machine's cores are shared, and wall time
    swings by a third from one run to the next with other work on them.
    """
    body = bench.after
    clean: list[float] = []
    floor: list[float] = []
    sdk: list[float] = []
    for _ in range(rounds):
        gc.collect()
        started = _now()
        orjson.loads(body)
        clean.append(_now() - started)
        tracker = bench.ready()
        gc.collect()
        started = _now()
        orjson.loads(body)
        floor.append(_now() - started)
        gc.collect()
        started = _now()
        bench.poll(tracker)
        sdk.append(_now() - started)
        del tracker
    return Timing.of(floor), Timing.of(sdk), Timing.of(clean)


def cpu_per_poll(size: int, rounds: int) -> float:
    """Median CPU seconds of one tracker poll at ``size`` deployments."""
    bench = PollBench(size)
    try:
        samples = []
        for _ in range(rounds):
            tracker = bench.ready()
            gc.collect()
            started = time.process_time()
            bench.poll(tracker)
            samples.append(time.process_time() - started)
            del tracker
        samples.sort()
        return samples[len(samples) // 2]
    finally:
        bench.close()


def updates_overhead(bench: PollBench, rounds: int) -> tuple[Timing, Timing]:
    """CPU of a poll alone and of a poll plus the snapshot ``updates()`` takes
    of it (the counts are kept by the diff: the snapshot reads them), alternately."""
    alone: list[float] = []
    with_update: list[float] = []
    for _ in range(rounds):
        for samples, take_snapshot in ((alone, False), (with_update, True)):
            tracker = bench.ready()
            gc.collect()
            started = _now()
            bench.poll(tracker)
            if take_snapshot:
                tracker.snapshot()
            samples.append(_now() - started)
            del tracker
    return Timing.of(alone), Timing.of(with_update)


def run(quick: bool) -> list[Row]:
    size = 2_000 if quick else 100_000
    rounds = 3 if quick else 9
    bench = PollBench(size)
    try:
        floor, sdk, clean = alternate(bench, rounds)
        alone, with_update = updates_overhead(bench, rounds)
    finally:
        bench.close()
    body = bench.after
    sizes = (1_000, 2_000) if quick else (1_000, 10_000, 100_000)
    figures: dict[str, Any] = {
        "deployments": size,
        "changed": bench.changed,
        "body_mb": round(len(body) / 1e6, 2),
        "floor_memory_held_ms": round(floor.median * 1e3, 1),
        "ratio_vs_memory_held_floor": round(sdk.median / floor.median, 2),
    }
    for n in sizes:
        figures[f"cpu_ms_per_poll_{n}"] = round(cpu_per_poll(n, 3 if quick else 5) * 1e3, 2)
    return [
        time_ratio(
            f"2 tracker poll, {size:,} deployments, 5% changed (decode+diff+yield)",
            clean,
            sdk,
            1.6,
            notes=(
                f"(CPU time; {sdk.median / floor.median:.2f}x a parse made while the "
                "tracker's previous answer is held)"
            ),
            figures=figures,
        ),
        time_ratio(
            f"11 updates() snapshot on a poll of {size:,} deployments (CPU vs the poll alone)",
            alone,
            with_update,
            1.05,
            figures={"poll_ms": round(alone.median * 1e3, 1)},
        ),
    ]
