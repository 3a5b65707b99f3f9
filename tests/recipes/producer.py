"""A recipe's producer in a process of its own, as a deployment runs it.

``python producer.py MODULE POLL_ID RUN COUNT CHUNK_SIZE`` imports the recipe
``MODULE`` (configured by its ``CAMPAIGNS_*`` variables), awaits its
``submit`` with ``make_users(COUNT)`` and prints ``input read``.
"""

from __future__ import annotations

import asyncio
import importlib
import sys

from helpers.bulk_child import make_users


def main(module: str, poll: str, run: str, count: str, chunk: str) -> None:
    recipe = importlib.import_module(module)
    asyncio.run(recipe.submit(poll, make_users(int(count)), run=run, chunk_size=int(chunk)))
    print("input read", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:6])
