"""The memory ledger's webhook deliveries: the keys seen, by namespace."""

from __future__ import annotations

import abc
import time


class MemorySeen(abc.ABC):
    """A part of :class:`MemoryLedger`."""

    _seen: dict[str, dict[str, float]]

    @abc.abstractmethod
    def _check_open(self) -> None: ...

    async def first_sighting(self, namespace: str, key: str) -> bool:
        seen = self._seen_in(namespace)
        if key in seen:
            return False
        seen[key] = time.time()
        return True

    async def forget(self, namespace: str, key: str) -> None:
        self._seen_in(namespace).pop(key, None)

    async def prune_seen(self, namespace: str, before: float) -> int:
        seen = self._seen_in(namespace)
        old = [key for key, when in seen.items() if when < before]
        for key in old:
            del seen[key]
        return len(old)

    def _seen_in(self, namespace: str) -> dict[str, float]:
        self._check_open()
        return self._seen.setdefault(namespace, {})
