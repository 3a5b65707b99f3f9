"""Which ledger this is: an identity written once, when the ledger is created.

A run is only as safe as the ledger that holds it: a worker or a resumed
send on a mistyped path would find an empty ledger and send everyone again.
So each ledger carries a random identity from its creation (a row of
``campaignkit_ledger``; a memory ledger its own); chunk messages name it, and
a claim checks it is still the ledger that was opened. Commands that only
read a run open ledgers with ``create=False``, which refuses a missing one
with :class:`LedgerNotFound`.
"""

from __future__ import annotations

import os
import uuid

from ..errors import LedgerError


class LedgerNotFound(LedgerError):
    """A ledger opened with ``create=False`` does not exist (no SQLite file, or
    no campaignkit tables in the PostgreSQL schema): nothing was created."""


class WrongLedger(LedgerError):
    """A chunk message names another ledger than the worker's: it belongs to
    the workers of that ledger, and was neither claimed nor sent here."""


def new_identity() -> str:
    return uuid.uuid4().hex


def file_stamp(path: str) -> str:
    """The file ``path`` names now (device and inode): another file moved in
    its place has another stamp. Raises ``FileNotFoundError`` once it is gone."""
    stat = os.stat(path)
    return f"{stat.st_dev}:{stat.st_ino}"
