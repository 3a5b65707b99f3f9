"""Sandbox at scale: accept and complete a 100,000-user campaign.

Runs the sandbox in its own process (``python -m campaignkit.sandbox``) and
measures, over real HTTP: the send (body size, time to 202), the time until
the launch is ``DONE``, the status GET (latency, body size) and the server's
RSS growth; then a million generated sessions and a page of them.

    python -m benchmarks.sandbox_scale [--users 100000] [--speed 100]
"""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import socket
import statistics
import sys
import time
from typing import Any

import aiohttp
import orjson


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _start(port: int, speed: float) -> tuple[asyncio.subprocess.Process, dict[str, str]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "campaignkit.sandbox",
        "--port",
        str(port),
        "--speed",
        str(speed),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    urls: dict[str, str] = {}
    while "api_key" not in urls:
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        if not line:
            raise RuntimeError("the sandbox exited before printing its URLs")
        name, _, value = line.partition(":")
        urls[name.strip()] = value.strip()
    return process, urls


async def _timed_get(http: aiohttp.ClientSession, url: str, **kw: Any) -> tuple[float, bytes]:
    started = time.perf_counter()
    async with http.get(url, **kw) as response:
        response.raise_for_status()
        body = await response.read()
    return time.perf_counter() - started, body


async def main(users: int, speed: float) -> None:
    process, urls = await _start(_free_port(), speed)
    key = {"Authorization": urls["api_key"]}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
            rss_start = _rss_mib(process.pid)
            body = orjson.dumps(
                {
                    "users": [
                        {
                            "country_code": "+52",
                            "cellphone": f"55{i:08d}",
                            "user_session_keys": [{"key": "name", "value": f"User {i}"}],
                        }
                        for i in range(users)
                    ]
                }
            )
            started = time.perf_counter()
            orjson.loads(body)
            floor = time.perf_counter() - started  # parsing alone, for scale
            started = time.perf_counter()
            async with http.post(
                f"{urls['campaign_url']}/v2/send-campaign/1001",
                data=body,
                headers={**key, "Content-Type": "application/json"},
            ) as answer:
                assert answer.status == 202, await answer.text()
                ack = await answer.json()
            accept = time.perf_counter() - started
            status_url = urls["campaign_url"] + ack["status_url"]
            latencies: list[float] = []
            size = 0
            while True:
                latency, raw = await _timed_get(http, status_url, headers=key)
                latencies.append(latency)
                record = orjson.loads(raw)
                size = len(raw)
                if record["status"] == "DONE":
                    break
                await asyncio.sleep(0.1)
            done = time.perf_counter() - started
            after = [(await _timed_get(http, status_url, headers=key))[0] for _ in range(10)]
            rss_done = _rss_mib(process.pid)
            snapshot = orjson.loads(
                (await _timed_get(http, urls["admin_url"] + "/state", params={"users": "0"}))[1]
            )
            received = snapshot["companies"][0]["received_users"]

            started = time.perf_counter()
            async with http.post(
                urls["admin_url"] + "/companies/company-1/sessions",
                json={"poll_id": 1002, "count": 1_000_000},
            ) as answer:
                assert answer.status == 201
            sessions_add = time.perf_counter() - started
            page, raw = await _timed_get(
                http,
                urls["base_url"] + "/devapi/poll/1002/sessions",
                headers=key,
                params={"limit": "10000"},
            )
            cursor = orjson.loads(raw)["next_id"]
            next_page, _ = await _timed_get(
                http,
                urls["base_url"] + "/devapi/poll/1002/sessions",
                headers=key,
                params={"limit": "10000", "after": cursor},
            )
            rss_end = _rss_mib(process.pid)
    finally:
        process.terminate()
        await process.wait()

    ms = 1000
    print(
        f"users sent:                 {users:,} ({len(body) / 2**20:.1f} MiB body), "
        f"sandbox received {received:,}"
    )
    print(
        f"send answered 202 in:       {accept * ms:.0f} ms "
        f"(floor: orjson.loads of the body here takes {floor * ms:.0f} ms)"
    )
    print(f"launch DONE after:          {done:.2f} s (speed {speed:g}, {len(latencies)} polls)")
    print(
        f"status GET while running:   median {statistics.median(latencies) * ms:.0f} ms, "
        f"max {max(latencies) * ms:.0f} ms"
    )
    print(
        f"status GET once DONE:       median {statistics.median(after) * ms:.0f} ms, "
        f"max {max(after) * ms:.0f} ms, body {size / 2**20:.1f} MiB"
    )
    print(
        f"sandbox RSS:                {rss_start:.0f} MiB at start, {rss_done:.0f} MiB at DONE "
        f"(+{rss_done - rss_start:.0f} MiB)"
    )
    print(
        f"1,000,000 sessions added:   {sessions_add * ms:.0f} ms; 10,000-session pages: "
        f"{page * ms:.0f} ms first, {next_page * ms:.0f} ms next; RSS {rss_end:.0f} MiB"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sandbox_scale")
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--speed", type=float, default=100.0)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.users, arguments.speed))
