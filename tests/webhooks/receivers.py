"""What the receiver tests give a receiver: recording callbacks, ledgers,
dedupe stores and clients, and the published sample of each kind."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from helpers import webhook_samples as samples

from campaignkit.webhooks import WebhookEvent

HUBSPOT_CLOSED: dict[str, Any] = {"external_id": "sess-9", "closed_at": "2019-01-03 10:00:00"}
"""The HubSpot variant of conversation closed, with the two fields the
service's OpenAPI shows for it (``/webhooks/on-conversation-closed-hubspot``)."""

UNKNOWN: dict[str, Any] = {"event_type": "something.new", "id": 7}
"""A body of no published kind: answered 200 all the same."""

ALL_SAMPLES = [
    samples.RESPONSE,
    samples.DELIVERED,
    samples.READ,
    samples.OPT_OUT,
    samples.TIMEOUT,
    samples.CONDITION,
    samples.CONVERSATION_CLOSED,
    HUBSPOT_CLOSED,
    samples.TEMPLATE_STATUS,
    UNKNOWN,
]


class Calls:
    """An on_event that records its events and answers ``answer``."""

    def __init__(self, answer: Any = None, delay: float = 0.0) -> None:
        self.events: list[WebhookEvent] = []
        self.answer = answer
        self.delay = delay

    async def __call__(self, event: WebhookEvent) -> Any:
        self.events.append(event)
        if self.delay:
            await asyncio.sleep(self.delay)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class Recorder:
    """A ``ledger=`` that records the events it is given."""

    def __init__(self) -> None:
        self.events: list[WebhookEvent] = []

    async def record_event(self, event: WebhookEvent) -> None:
        self.events.append(event)


class CountingStore:
    """A dedupe store in memory that counts what reached it."""

    def __init__(self, fail: bool = False) -> None:
        self.seen: dict[tuple[str, str], float] = {}
        self.fail = fail

    async def first_sighting(self, namespace: str, key: str) -> bool:
        if self.fail:
            raise OSError("store down")
        fresh = (namespace, key) not in self.seen
        self.seen.setdefault((namespace, key), time.time())
        return fresh

    async def forget(self, namespace: str, key: str) -> None:
        self.seen.pop((namespace, key), None)

    async def prune_seen(self, namespace: str, before: float) -> int:
        old = [k for k, at in self.seen.items() if k[0] == namespace and at < before]
        for k in old:
            del self.seen[k]
        return len(old)


class Updates:
    """A ``client=`` recording ``update_session`` calls (made on any loop),
    each taking ``delay`` seconds as a call over the network would."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.delay = delay

    async def update_session(self, session_external_id: str, user_session_keys: Any) -> None:
        await asyncio.sleep(self.delay)
        self.calls.append((session_external_id, user_session_keys))

    async def wait(self, count: int) -> None:
        for _ in range(250):
            if len(self.calls) >= count:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{len(self.calls)} update_session calls, wanted {count}")
