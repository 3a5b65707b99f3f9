"""``python -m campaignkit.sandbox --port N --speed S --seed K``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging

from ._server import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m campaignkit.sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--speed", type=float, default=1.0, help="sandbox seconds per second")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--legacy", action="store_true", help="serve the retired legacy deploy")
    parser.add_argument("--reply-probability", type=float, default=0.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            serve(
                args.host,
                args.port,
                args.speed,
                args.seed,
                legacy_enabled=args.legacy,
                reply_probability=args.reply_probability,
            )
        )


if __name__ == "__main__":
    main()
