"""Where webhook handlers remember the deliveries they already handled.

Records expire after the handler's ``retention`` (default 7 days: the service
documents no retry, so a repeat comes within seconds if at all) and are pruned
as deliveries arrive. The default store is in memory (the last
``dedupe_size`` deliveries): it dies with the process and is not shared, so
replicas behind a load balancer pass a ledger of :mod:`campaignkit.ledger`
(any :class:`DedupeStore` will do).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Protocol

DEDUPE_NAMESPACE = "first_reply"
"""The namespace of the session ids the deprecated first-reply handler keeps."""

EVENTS_NAMESPACE = "webhook_events"
"""The namespace of the delivery digests :func:`webhook_handler` keeps."""

DEFAULT_RETENTION = 7 * 24 * 3600.0


class DedupeStore(Protocol):
    """Where delivered keys are remembered (a ledger of
    :mod:`campaignkit.ledger`); failures raise :class:`LedgerError`."""

    async def first_sighting(self, namespace: str, key: str) -> bool:
        """Remember ``key``; True the first time it is seen in ``namespace``."""
        ...

    async def forget(self, namespace: str, key: str) -> None: ...

    async def prune_seen(self, namespace: str, before: float) -> int:
        """Forget the keys of ``namespace`` first seen before ``before`` (UNIX
        seconds); how many were forgotten."""
        ...


class RecentIds:
    """The default :class:`DedupeStore`: the last ``size`` keys, in memory (LRU)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._seen: OrderedDict[tuple[str, str], float] = OrderedDict()

    async def first_sighting(self, namespace: str, key: str) -> bool:
        if (namespace, key) in self._seen:
            self._seen.move_to_end((namespace, key))
            return False
        if self._size:
            self._seen[namespace, key] = time.time()
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)
        return True

    async def forget(self, namespace: str, key: str) -> None:
        self._seen.pop((namespace, key), None)

    async def prune_seen(self, namespace: str, before: float) -> int:
        stale = [k for k, seen in self._seen.items() if k[0] == namespace and seen < before]
        for k in stale:
            del self._seen[k]
        return len(stale)


class Pruner:
    """Forgets the keys of ``namespace`` in ``store`` older than ``retention``
    seconds, at most once per hundredth of it (a DELETE per delivery would
    cost more); each handler awaits it before remembering a delivery."""

    def __init__(self, store: DedupeStore, namespace: str, retention: float) -> None:
        self._store, self._namespace, self.retention = store, namespace, retention
        self._pruned_at = 0.0

    async def __call__(self) -> None:
        now = time.time()
        if now - self._pruned_at >= self.retention / 100:
            self._pruned_at = now
            # A store of an earlier release may not prune: it still dedupes.
            prune = getattr(self._store, "prune_seen", None)
            if prune is not None:
                await prune(self._namespace, now - self.retention)
