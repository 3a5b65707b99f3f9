"""The I/O seam: one HTTP exchange, request in, status, headers and bytes out.

The transport (retries, error mapping, decoding) is written against this
protocol only; :mod:`campaignkit._io.aiohttp_exchange` is the adapter the
client uses, and :mod:`campaignkit.testing` publishes the seam with a fake of
it, so tests answer requests without any network or patching of aiohttp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import attrs
import orjson
from multidict import CIMultiDict

from .._wire.sansio import Request


@attrs.frozen
class Answer:
    """What came back: ``headers`` are looked up case-insensitively."""

    status: int
    headers: Mapping[str, str] = attrs.field(repr=False)
    body: bytes = attrs.field(repr=False)

    @classmethod
    def json(
        cls, payload: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Answer:
        """An answer whose body is ``payload`` as JSON."""
        all_headers = CIMultiDict({"Content-Type": "application/json"})
        all_headers.update(headers or {})
        return cls(status, all_headers, orjson.dumps(payload))


class Exchange(Protocol):
    """Sends one request and reads its whole answer, never retrying.

    Raises :class:`campaignkit.errors.ConnectionError` or
    :class:`~campaignkit.errors.TimeoutError`, with ``request_sent`` saying
    whether any byte of the request may have left (what decides whether a send
    is ambiguous), and :class:`~campaignkit.errors.ResponseError` for an answer
    over ``max_response_bytes``. Redirects are never followed.
    """

    async def __call__(self, request: Request, timeout: float) -> Answer: ...

    async def aclose(self) -> None:
        """Release connections the exchange owns; idempotent."""
        ...
