"""Sessions: reply-created records and lazily generated bulk blocks.

Listing merges every source of a poll in ``(created_at, id)`` order and pages
with an opaque cursor naming the last item given, so a million generated
sessions cost a few integers until a page of them is read.
"""

from __future__ import annotations

import base64
import bisect
import heapq
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import attrs

__all__ = [
    "BadCursor",
    "PollSessions",
    "SessionBlock",
    "SessionRecord",
    "decode_cursor",
    "format_time",
    "iso_time",
    "message",
]

US = 1_000_000
Key = tuple[int, str]
Meta = dict[str, Any]
# A listing entry: sort key, then the block and index to render it from
# (block None: index into the poll's records).
Entry = tuple[Key, "SessionBlock | None", int]


class BadCursor(ValueError):
    """The ``next_id`` given is not one this sandbox produced."""


def format_time(micros: int) -> str:
    """``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC, the spec's session time text."""
    return datetime.fromtimestamp(micros / US, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def iso_time(seconds: float) -> str:
    """ISO 8601 in UTC to the millisecond with ``Z``, as the service writes
    its few ISO times (e.g. ``2024-09-10T12:34:56.789Z``)."""
    return (
        datetime.fromtimestamp(seconds, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def encode_cursor(key: Key) -> str:
    raw = f"{key[0]}|{key[1]}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> Key:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        micros, session_id = raw.split("|", 1)
        return int(micros), session_id
    except ValueError as exc:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise BadCursor(cursor) from exc


def message(sender: str, text: str, created: int, delivered: int | None, read: int | None) -> Meta:
    """One ``MESSAGE`` history entry with a ``TEXT`` message."""
    return {
        "type": "MESSAGE",
        "message": {
            "type": "TEXT",
            "sender": sender,
            "text": text,
            "file_url": None,
            "created_at": created,
            "delivered_at": delivered,
            "read_at": read,
            "extra": None,
        },
    }


@attrs.define(slots=True)
class SessionRecord:
    """A materialised session: metadata, session keys and message history."""

    id: str
    company_id: str
    poll_id: int
    created_us: int
    finished_us: int
    country_code: str
    cellphone: str
    keys: dict[str, str]
    history: list[Meta]
    conversation_id: str | None = None
    """The deployment that opened it (sessions a reply or a webhook opened)."""
    answered: int = 0
    """How many questions of its poll's flow the user answered."""
    types: dict[str, str] = attrs.Factory(dict)
    """The type of each key given one (e.g. ``location``); other keys have none."""

    @property
    def key(self) -> Key:
        return (self.created_us, self.id)

    def set_keys(self, values: dict[str, str], types: dict[str, str]) -> None:
        """Merge ``values``; each keeps the type given with it (in ``types``), or none."""
        self.keys.update(values)
        self.types = {k: t for k, t in self.types.items() if k not in values} | types

    def meta(self) -> Meta:
        return _meta(self.id, self.created_us, self.finished_us, self.country_code, self.cellphone)


def _meta(session_id: str, created: int, finished: int, country_code: str, cellphone: str) -> Meta:
    return {
        "id": session_id,
        "created_at": format_time(created),
        "finished_at": format_time(finished),
        "user": {"country_code": country_code, "cellphone": cellphone},
    }


@attrs.frozen
class SessionBlock:
    """``count`` generated sessions evenly spread from ``start_us``.

    Session ``i`` exists only as arithmetic until read; ids are zero-padded so
    id order is index order within a block.
    """

    block_id: int
    company_id: str
    poll_id: int
    start_us: int
    step_us: int = attrs.field(validator=attrs.validators.ge(1))
    count: int

    PREFIX = "ses-"

    def session_id(self, index: int) -> str:
        return f"{self.PREFIX}{self.block_id}-{index:07d}"

    @classmethod
    def parse_id(cls, session_id: str) -> tuple[int, int] | None:
        """``(block_id, index)`` of a generated session id, else None."""
        if not session_id.startswith(cls.PREFIX):
            return None
        block, _, index = session_id[len(cls.PREFIX) :].partition("-")
        if not (block.isdigit() and index.isdigit()):
            return None
        return int(block), int(index)

    def created_us(self, index: int) -> int:
        return self.start_us + index * self.step_us

    def user(self, index: int) -> tuple[str, str]:
        return "+52", f"55{(self.block_id * 7919 + index) % 10**8:08d}"

    def _first_after(self, key: Key) -> int:
        """Index of the first session whose key is greater than ``key``."""
        index = max(0, -(-(key[0] - self.start_us) // self.step_us))
        while index < self.count and (self.created_us(index), self.session_id(index)) <= key:
            index += 1
        return min(index, self.count)

    def keys_after(self, key: Key, end_us: int) -> Iterator[Entry]:
        for index in range(self._first_after(key), self.count):
            created = self.created_us(index)
            if created > end_us:
                return
            yield (created, self.session_id(index)), self, index

    def meta(self, index: int) -> Meta:
        created = self.created_us(index)
        return _meta(self.session_id(index), created, created + 90 * US, *self.user(index))

    def materialise(self, index: int) -> SessionRecord:
        created = self.created_us(index)
        country_code, cellphone = self.user(index)
        seconds = created // US
        return SessionRecord(
            id=self.session_id(index),
            company_id=self.company_id,
            poll_id=self.poll_id,
            created_us=created,
            finished_us=created + 90 * US,
            country_code=country_code,
            cellphone=cellphone,
            keys={},
            history=[
                message(
                    "AI",
                    "Hello! Do you have a minute for a short survey?",
                    seconds,
                    seconds + 1,
                    seconds + 5,
                ),
                message("USER", "Yes", seconds + 30, seconds + 30, seconds + 31),
            ],
        )


@attrs.define
class PollSessions:
    """Every session of one poll: sorted records plus generated blocks."""

    records: list[SessionRecord] = attrs.Factory(list)
    blocks: list[SessionBlock] = attrs.Factory(list)

    def add(self, record: SessionRecord) -> None:
        bisect.insort(self.records, record, key=lambda r: r.key)

    def count(self) -> int:
        return len(self.records) + sum(block.count for block in self.blocks)

    def _records_after(self, key: Key, end_us: int) -> Iterator[Entry]:
        start = bisect.bisect_right(self.records, key, key=lambda r: r.key)
        for index in range(start, len(self.records)):
            record = self.records[index]
            if record.created_us > end_us:
                return
            yield record.key, None, index

    def page(
        self, start_us: int, end_us: int, limit: int, cursor: str | None
    ) -> tuple[list[Meta], str]:
        """One page of metadata and the next cursor (``""`` on the last page)."""
        # (start_us, "") sorts before every session created at start_us.
        after = max(decode_cursor(cursor), (start_us, "")) if cursor else (start_us, "")
        sources = [self._records_after(after, end_us)]
        sources += [block.keys_after(after, end_us) for block in self.blocks]
        merged = heapq.merge(*sources, key=lambda entry: entry[0])
        window = list(itertools.islice(merged, limit + 1))
        results = [
            self.records[index].meta() if block is None else block.meta(index)
            for _, block, index in window[:limit]
        ]
        next_id = encode_cursor(window[limit - 1][0]) if len(window) > limit else ""
        return results, next_id
