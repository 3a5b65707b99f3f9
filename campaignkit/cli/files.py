"""Output files written whole or not at all (a ``.part`` file renamed at the end)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

from .context import UsageError


async def write_atomically(path: Path, write: Callable[[TextIO], Awaitable[int]]) -> int:
    """``write`` into ``path``; what it returns (a count of records)."""
    tmp = path.with_name(path.name + ".part")
    try:
        # A CLI's own output file: blocking writes are fine here.
        with open(tmp, "w", encoding="utf-8", newline="") as f:  # noqa: ASYNC230
            count = await write(f)
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return count
