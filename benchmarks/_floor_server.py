"""A minimal aiohttp server answering canned bodies, run in its own process so
the floor and the SDK share it and neither shares its CPU.

``python -m benchmarks._floor_server --port N --sessions TOTAL --page P``
serves the small campaign status at ``/campaign/v2/send-campaign/{id}`` and
``TOTAL`` sessions in pages of ``P`` at ``/main/devapi/poll/{id}/sessions``
(the cursor is the offset).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

from aiohttp import web

from ._payloads import campaign_status, session_page

JSON = "application/json"


def make_app(total_sessions: int, page_size: int) -> web.Application:
    status_body = campaign_status(10)
    full_page = session_page(page_size, "{cursor}")
    app = web.Application()

    async def status(_: web.Request) -> web.Response:
        return web.Response(body=status_body, content_type=JSON)

    async def sessions(request: web.Request) -> web.Response:
        offset = int(request.query.get("after") or 0)
        following = offset + page_size
        cursor = str(following) if following < total_sessions else ""
        body = full_page.replace(b"{cursor}", cursor.encode())
        return web.Response(body=body, content_type=JSON)

    app.router.add_get("/campaign/v2/send-campaign/{launch_request_id}", status)
    app.router.add_get("/main/devapi/poll/{poll_id}/sessions", sessions)
    return app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def running(*args: str, module: str = "benchmarks._floor_server") -> Iterator[str]:
    """Run ``module`` on a free port in a subprocess; yield its base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", module, "--port", str(port), *args], stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"{module} did not start on port {port}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--page", type=int, default=10_000)
    args = parser.parse_args()
    app = make_app(args.sessions, args.page)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
