"""Reading and writing an SQLite file directly, as a test does beside a ledger."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from os import PathLike


@contextlib.contextmanager
def sqlite_file(path: str | PathLike[str]) -> Iterator[sqlite3.Connection]:
    """A connection to ``path``, committed then closed on leaving.

    ``with sqlite3.connect(path) as conn`` commits but leaves the connection
    open until it is collected, which Python 3.13 warns of (an error here).
    """
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        yield conn
