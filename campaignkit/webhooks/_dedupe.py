"""Where the first-reply handler remembers the session ids it accepted.

The default is an in-memory window of the last ``dedupe_size`` ids (LRU): it
dies with the process and is not shared, so a restarted receiver, or one of
several replicas behind a load balancer, would run ``on_reply`` again for a
redelivered webhook. A ledger of :mod:`campaignkit.ledger` (or any
:class:`DedupeStore`) keeps the ids under :data:`DEDUPE_NAMESPACE` for good.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

DEDUPE_NAMESPACE = "first_reply"
"""The namespace of the session ids a ``dedupe=`` ledger keeps."""


class DedupeStore(Protocol):
    """Where delivered session ids are remembered (a ledger of
    :mod:`campaignkit.ledger`); failures raise :class:`LedgerError`."""

    async def first_sighting(self, namespace: str, key: str) -> bool:
        """Remember ``key``; True the first time it is seen in ``namespace``."""
        ...

    async def forget(self, namespace: str, key: str) -> None: ...


class RecentIds:
    """The default :class:`DedupeStore`: the last ``size`` ids, in memory (LRU)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._seen: OrderedDict[str, None] = OrderedDict()

    async def first_sighting(self, namespace: str, key: str) -> bool:
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        if self._size:
            self._seen[key] = None
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)
        return True

    async def forget(self, namespace: str, key: str) -> None:
        self._seen.pop(key, None)
