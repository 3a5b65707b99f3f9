"""Rows 5 and 6: building a 1,000-user send body, and ``send_bulk`` of 100,000
users to the sandbox (in its own process) against a one-user-per-request loop
and a raw aiohttp chunked sender; plus the peak memory of a 1,000,000-user
generator input, measured in a fresh process against a local stub server;
plus row 6n: 1,000,000 users through ``send_bulk(journal=None)`` to the
sandbox, wall time and peak RSS growth against a raw aiohttp chunked sender
reading the same generator, each side in a fresh process.

``python -m benchmarks.bench_bulk --port N`` runs the stub (it parses each
send's body and answers 202);
``python -m benchmarks.bench_bulk --memory URL COUNT`` runs one memory probe;
``python -m benchmarks.bench_bulk --probe SIDE URL KEY POLL COUNT OFFSET`` one
side of row 6n.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from campaignkit import CampaignClient, User
from campaignkit._input.validation import users_tuple
from campaignkit._wire import sansio as wire
from campaignkit._wire.body import users_wire
from campaignkit.bulk import Planner

from ._floor_server import free_port, running
from ._harness import Row, Timing, ab_async, ab_sync, throughput_ratio, time_ratio

CHUNK = 1000
CONCURRENCY = 4
MEMORY_BUDGET_MB = 64.0  # as issue 8 row 7 asks of iter_sessions over 1,000,000 sessions


def make_users(count: int, start: int = 0) -> list[User]:
    return [
        User(
            cellphone=f"55{i:08d}",
            country_code="+52",
            user_session_keys={"name": f"user {i}", "plan": "gold"},
        )
        for i in range(start, start + count)
    ]


def raw_dict(user: User) -> dict[str, Any]:
    """What a hand-written sender builds: no validation, no normalisation."""
    return {
        "cellphone": user.cellphone,
        "country_code": user.country_code,
        "user_session_keys": [{"key": k.key, "value": k.value} for k in user.user_session_keys],
    }


# -- row 5 ----------------------------------------------------------------------


def row5(quick: bool) -> list[Row]:
    users = make_users(1000)
    prebuilt = [raw_dict(user) for user in users]
    client = CampaignClient("bench-key", campaign_url="http://127.0.0.1:9")
    rounds, repeat = (5, 5) if quick else (30, 20)

    def floor() -> None:
        for _ in range(repeat):
            orjson.dumps({"users": prebuilt})

    def sdk() -> None:  # what send_campaign does before any I/O
        for _ in range(repeat):
            problems: list[tuple[str, str]] = []
            given = users_tuple(users, problems)
            body = users_wire(given, problems)
            wire.build_request(
                client.config,
                wire.SEND_CAMPAIGN,
                path_params={"poll_id": "7"},
                json={"users": body},
                users=given,
            )

    def bulk_chunk() -> None:  # what send_bulk does per chunk (validate, dedup, body)
        for _ in range(repeat):
            planner = Planner(len(users))
            for user in users:
                chunk = planner.take(user)
            assert chunk is not None
            _ = chunk.body

    floor_t, sdk_t = ab_sync(floor, sdk, rounds)
    _, bulk_t = ab_sync(floor, bulk_chunk, rounds)
    per = 1e6 / repeat
    return [
        time_ratio(
            "5 build a 1,000-user send_campaign body (validation + serialisation)",
            _scale(floor_t, 1 / repeat),
            _scale(sdk_t, 1 / repeat),
            5.0,  # issue 21
            notes=f"(send_bulk's per-chunk path: {bulk_t.median / floor_t.median:.1f}x)",
            figures={
                "floor_us": floor_t.median * per,
                "send_campaign_us": sdk_t.median * per,
                "send_bulk_chunk_us": bulk_t.median * per,
            },
        )
    ]


def _scale(timing: Timing, factor: float) -> Timing:
    return Timing(timing.median * factor, timing.minimum * factor, timing.maximum * factor)


# -- row 6 ----------------------------------------------------------------------


@contextlib.contextmanager
def sandbox() -> Iterator[dict[str, str]]:
    """``python -m campaignkit.sandbox`` on a free port: its URLs and api_key."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "campaignkit.sandbox", "--port", str(port), "--speed", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        urls: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while "api_key" not in urls:
            line = process.stdout.readline()
            if not line or time.monotonic() > deadline:
                raise RuntimeError("the sandbox did not start")
            name, _, value = line.partition(":")
            urls[name.strip()] = value.strip()
        yield urls
    finally:
        process.terminate()
        process.wait(10)


async def row6(quick: bool) -> list[Row]:
    total = 2_000 if quick else 100_000
    sample = 50 if quick else 1_000
    rounds = 2 if quick else 3
    with sandbox() as urls:
        campaign_url, key = urls["campaign_url"], urls["api_key"]
        async with (
            CampaignClient(key, campaign_url=campaign_url, base_url=urls["base_url"]) as client,
            aiohttp.ClientSession() as raw,
        ):
            poll = (await client.list_polls())[0].id
            url = f"{campaign_url}/v2/send-campaign/{poll}"
            headers = {"Authorization": key, "Content-Type": "application/json"}
            offset = 0

            def batch(count: int) -> list[User]:
                # Fresh phones every round: the sandbox keeps what it received.
                nonlocal offset
                offset += count
                return make_users(count, offset)

            async def post(body: bytes) -> None:
                async with raw.post(url, data=body, headers=headers) as response:
                    orjson.loads(await response.read())
                    if response.status != 202:
                        raise RuntimeError(f"raw send answered {response.status}")

            async def raw_chunked() -> None:
                users = batch(total)
                queue: asyncio.Queue[list[User] | None] = asyncio.Queue(CONCURRENCY)

                async def reader() -> None:
                    for start in range(0, total, CHUNK):
                        await queue.put(users[start : start + CHUNK])
                    for _ in range(CONCURRENCY):
                        await queue.put(None)

                async def sender() -> None:
                    while (chunk := await queue.get()) is not None:
                        await post(orjson.dumps({"users": [raw_dict(u) for u in chunk]}))

                await asyncio.gather(reader(), *(sender() for _ in range(CONCURRENCY)))

            async def sdk() -> None:
                report = await client.send_bulk(
                    poll, iter(batch(total)), chunk_size=CHUNK, concurrency=CONCURRENCY
                )
                if report.counts["accepted"] != total:
                    raise RuntimeError(f"send_bulk did not complete: {report!r}")

            async def naive_sample() -> None:
                for user in batch(sample):
                    await post(orjson.dumps({"users": [raw_dict(user)]}))

            await sdk()  # warm up both paths and the pool
            await raw_chunked()
            raw_t, sdk_t = await ab_async(raw_chunked, sdk, rounds)
            naive_samples = []
            for _ in range(rounds):
                started = time.perf_counter()
                await naive_sample()
                naive_samples.append((time.perf_counter() - started) * total / sample)
            naive_t = Timing.of(naive_samples)
    figures = {
        "users": total,
        "sdk_users_per_s": total / sdk_t.median,
        "raw_users_per_s": total / raw_t.median,
        "naive_users_per_s": total / naive_t.median,
        "raw_vs_naive": naive_t.median / raw_t.median,
    }
    return [
        throughput_ratio(
            f"6a send_bulk {total:,} users to the sandbox vs one user per request, sequential",
            naive_t,
            sdk_t,
            50.0,
            notes=(
                f"(naive loop timed on {sample:,} users, extrapolated to {total:,}; "
                f"the raw chunked sender itself is {naive_t.median / raw_t.median:.1f}x it)"
            ),
            figures=figures,
        ),
        throughput_ratio(
            f"6b send_bulk {total:,} users vs raw aiohttp chunked sender "
            f"(chunks of {CHUNK}, concurrency {CONCURRENCY})",
            raw_t,
            sdk_t,
            0.90,
            figures=figures,
        ),
    ]


# -- memory -----------------------------------------------------------------------


def _peak_mb() -> float:
    """Peak RSS of this process (VmHWM: unlike ru_maxrss, not inherited across exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def memory_probe(url: str, count: int) -> dict[str, float]:
    """send_bulk of a ``count``-user generator to the stub; peak RSS growth."""

    def generate() -> Iterator[User]:
        for i in range(count):
            yield User(cellphone=f"55{i:08d}", country_code="+52", user_session_keys={"n": str(i)})

    async with CampaignClient("bench-key", campaign_url=url) as client:
        await client.send_bulk(1, iter(make_users(10)), chunk_size=CHUNK)  # warm up
        baseline = _peak_mb()
        started = time.perf_counter()
        report = await client.send_bulk(1, generate(), chunk_size=CHUNK, concurrency=CONCURRENCY)
        elapsed = time.perf_counter() - started
    assert report.counts["accepted"] == count, repr(report)
    return {"growth_mb": _peak_mb() - baseline, "elapsed_s": elapsed}


def run_probe(url: str, count: int) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_bulk", "--memory", url, str(count)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def memory_row(quick: bool) -> list[Row]:
    big, small = (20_000, 2_000) if quick else (1_000_000, 100_000)
    with running(module="benchmarks.bench_bulk") as url:
        large = run_probe(url, big)
        little = run_probe(url, small)
    return [
        Row(
            f"6m peak RSS growth, send_bulk of a {big:,}-user generator, vs a 64 MB budget",
            large["growth_mb"] / MEMORY_BUDGET_MB,
            1.0,
            notes=(
                f"({large['growth_mb']:.1f} MB for {big:,} users, "
                f"{little['growth_mb']:.1f} MB for {small:,}; "
                f"{big / large['elapsed_s']:,.0f} users/s to a stub server)"
            ),
            figures={
                f"growth_mb_{big}": large["growth_mb"],
                f"growth_mb_{small}": little["growth_mb"],
                "users_per_s": big / large["elapsed_s"],
            },
        )
    ]


# -- row 6n: the no-journal path at 1,000,000 users -----------------------------


def _generate(count: int, offset: int) -> Iterator[User]:
    for i in range(offset, offset + count):
        yield User(cellphone=f"5{i:09d}", country_code="+52", user_session_keys={"n": str(i)})


async def side_probe(side: str, url: str, key: str, poll: str, count: int, offset: int) -> Any:
    """One side of row 6n in this (fresh) process: elapsed seconds, this
    process's CPU seconds (the sandbox's pace, which sets the wall time on a
    shared machine, aside) and peak RSS growth."""
    async with CampaignClient(key, campaign_url=url) as client:
        # Warm up the pool and the imports on both sides alike.
        await client.send_bulk(poll, _generate(10, offset + count), chunk_size=CHUNK)
        baseline = _peak_mb()
        started, cpu = time.perf_counter(), time.process_time()
        if side == "sdk":
            report = await client.send_bulk(
                poll, _generate(count, offset), chunk_size=CHUNK, concurrency=CONCURRENCY
            )
            assert report.counts["accepted"] == count, repr(report)
        else:
            await _raw_stream(f"{url}/v2/send-campaign/{poll}", key, _generate(count, offset))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"growth_mb": _peak_mb() - baseline, "elapsed_s": elapsed, "cpu_s": cpu}


async def _raw_stream(url: str, key: str, users: Iterator[User]) -> None:
    """The floor: chunks of a generator POSTed with raw aiohttp, no checks, no dedupe."""
    headers = {"Authorization": key, "Content-Type": "application/json"}
    queue: asyncio.Queue[list[User] | None] = asyncio.Queue(CONCURRENCY)

    async def reader() -> None:
        chunk: list[User] = []
        for user in users:
            chunk.append(user)
            if len(chunk) == CHUNK:
                await queue.put(chunk)
                chunk = []
        if chunk:
            await queue.put(chunk)
        for _ in range(CONCURRENCY):
            await queue.put(None)

    async with aiohttp.ClientSession() as raw:

        async def sender() -> None:
            while (chunk := await queue.get()) is not None:
                body = orjson.dumps({"users": [raw_dict(u) for u in chunk]})
                async with raw.post(url, data=body, headers=headers) as response:
                    orjson.loads(await response.read())
                    if response.status != 202:
                        raise RuntimeError(f"raw send answered {response.status}")

        await asyncio.gather(reader(), *(sender() for _ in range(CONCURRENCY)))


def row6n(quick: bool) -> list[Row]:
    count = 20_000 if quick else 1_000_000
    rounds = 1 if quick else 2
    samples: dict[str, list[dict[str, float]]] = {"raw": [], "sdk": []}
    for round_ in range(rounds):
        # A fresh sandbox each round: it keeps every user it receives.
        with sandbox() as urls:

            async def first_poll() -> str:
                async with CampaignClient(
                    urls["api_key"], campaign_url=urls["campaign_url"], base_url=urls["base_url"]
                ) as client:
                    return str((await client.list_polls())[0].id)

            poll = asyncio.run(first_poll())
            for index, side in enumerate(("raw", "sdk")):
                offset = (round_ * 2 + index) * (count + 100)
                args = [side, urls["campaign_url"], urls["api_key"], poll, str(count), str(offset)]
                out = subprocess.run(
                    [sys.executable, "-m", "benchmarks.bench_bulk", "--probe", *args],
                    capture_output=True,
                    text=True,
                    check=True,
                    timeout=900,
                )
                samples[side].append(json.loads(out.stdout))
    times = {side: Timing.of([s["elapsed_s"] for s in got]) for side, got in samples.items()}
    cpu = {side: Timing.of([s["cpu_s"] for s in got]) for side, got in samples.items()}
    memory = {side: Timing.of([s["growth_mb"] for s in got]) for side, got in samples.items()}
    figures = {
        "users": count,
        "sdk_s": times["sdk"].median,
        "raw_s": times["raw"].median,
        "sdk_cpu_s": cpu["sdk"].median,
        "raw_cpu_s": cpu["raw"].median,
        "sdk_growth_mb": memory["sdk"].median,
        "raw_growth_mb": memory["raw"].median,
    }
    return [
        time_ratio(
            f"6n send_bulk(journal=None) of {count:,} users to the sandbox vs raw aiohttp "
            "chunked sender of the same generator (wall time)",
            times["raw"],
            times["sdk"],
            None,
            notes=(
                f"(client CPU {cpu['sdk'].median:.1f} s against {cpu['raw'].median:.1f} s: "
                f"{cpu['sdk'].median / cpu['raw'].median:.2f}x; "
                f"peak RSS growth {memory['sdk'].median:.1f} MB against the raw sender's "
                f"{memory['raw'].median:.1f} MB: "
                f"{memory['sdk'].median / max(memory['raw'].median, 0.1):.1f}x)"
            ),
            figures=figures,
        )
    ]


def run(quick: bool) -> list[Row]:
    rows = row5(quick)
    rows += asyncio.run(row6(quick))
    rows += memory_row(quick)
    rows += row6n(quick)
    return rows


# -- the stub server (its own process) ------------------------------------------


def stub_app() -> web.Application:
    counter = 0

    async def send(request: web.Request) -> web.Response:
        nonlocal counter
        if not orjson.loads(await request.read())["users"]:  # parsed, as the service does
            return web.Response(status=400)
        counter += 1
        body = {
            "message": "queued",
            "id": request.match_info["poll_id"],
            "batch_id": f"b{counter}",
            "launch_request_id": f"l{counter}",
            "status_url": f"/v2/send-campaign/l{counter}",
        }
        return web.Response(body=orjson.dumps(body), status=202, content_type="application/json")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v2/send-campaign/{poll_id}", send)
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    parser.add_argument("--memory", nargs=2, metavar=("URL", "COUNT"))
    parser.add_argument("--probe", nargs=6, metavar=("SIDE", "URL", "KEY", "POLL", "N", "OFF"))
    parser.add_argument("--only", choices=["6n"])
    args = parser.parse_args()
    if args.probe:
        side, url, key, poll, count, offset = args.probe
        print(json.dumps(asyncio.run(side_probe(side, url, key, poll, int(count), int(offset)))))
        return
    if args.only:
        for row in row6n(quick=False):
            print(row.name, f"{row.ratio:.2f}x", row.notes, json.dumps(row.figures))
        return
    if args.memory:
        url, count = args.memory
        print(json.dumps(asyncio.run(memory_probe(url, int(count)))))
        return
    web.run_app(stub_app(), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
