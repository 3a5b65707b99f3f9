"""Every decode of an answer's body, in one voice: a :class:`ResponseError`
that names the offending field's JSON path (``$.deployments[1].status``).

orjson parses and the converter (:mod:`campaignkit._wire.convert`) builds every
resource. The two payloads that come by the ten thousand, a campaign status
and a page of sessions, are read by msgspec into GC-free records instead:
the tracker diffs the status's (:class:`StatusAnswer`), and a decoded
:class:`CampaignStatus` or :class:`SessionPage` holds its items' in an
:class:`OnAccess` sequence that makes the models in C as they are read.
Whatever msgspec refuses goes through the converter, which either builds it
too or names the problem.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import partial
from itertools import chain
from typing import Any, TypeVar, overload

import msgspec

from ..models import CampaignStatus, Deployment, SessionMeta, SessionPage
from ..status import CampaignState, DeploymentStatus
from .convert import parse_json, structure

T = TypeVar("T")

Decode = Callable[[bytes, int, Mapping[str, str]], T]
"""Reads a 2xx answer's body (given its status and headers) as a model."""


def decoder(cls: type[T]) -> Decode[T]:
    """The decode function of ``cls``, built once."""
    decode = _decoders.get(cls)
    if decode is None:
        decode = _decoders[cls] = _converting(cls)
    return decode


# -- the campaign status: GC-free records, read by msgspec --------------------


class StatusEntry(msgspec.Struct, gc=False):
    """A deployment as the tracker reads it. Every field may be absent: which
    identifier keys it is the tracker's choice; the model requires all three."""

    conversation_id: str | None = None
    service_id: str | None = None
    cellphone: str | None = None
    business_scope_id: str | None = None
    username: str | None = None
    status: str | None = None


class StatusAnswer(msgspec.Struct, gc=False):
    """A campaign status answer. Neither class is tracked by the cyclic GC
    (they hold only strings), so 100,000 entries cost it nothing."""

    launch_request_id: str
    status: CampaignState
    poll_id: int
    deployments: list[StatusEntry]


_read_status_answer = msgspec.json.Decoder(StatusAnswer).decode


def _decode_status_answer(body: bytes, status: int, headers: Mapping[str, str]) -> StatusAnswer:
    try:
        return _read_status_answer(body)
    except msgspec.MsgspecError:
        return structure(parse_json(body, status, headers), StatusAnswer)


def _converting(cls: type[T]) -> Decode[T]:
    def decode(body: bytes, status: int, headers: Mapping[str, str]) -> T:
        return structure(parse_json(body, status, headers), cls)

    return decode


# -- the answers that come by the ten thousand: read by msgspec in C -------------
# Rows 1 (decode a 100,000-deployment status) and 7 (iter_sessions): building
# every model of a large answer up front costs more than parsing it, most of
# it in the cyclic GC walking the new tracked objects again and again while
# the answer is held. msgspec reads the answer in C into records declared
# gc=False (all checks done there, the GC never walks them), and the models
# are made from them in C (msgspec.convert) a chunk at a time as they are
# read: a reader going through them frees each chunk before the next is made.

_CHUNK = 256  # models made at once: few enough that the GC never sees them pile up


class OnAccess(Sequence[T]):
    """A read-only sequence of ``T`` made from records when read (``make``
    makes the items of a slice of them). It equals, hashes, shows and pickles
    as the tuple of its items."""

    __slots__ = ("_make", "_records")

    def __init__(self, make: Callable[[list[Any]], list[T]], records: list[Any]) -> None:
        self._make = make
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self._make(self._records[index]))
        return self._make([self._records[index]])[0]

    def __iter__(self) -> Iterator[T]:
        records = self._records
        chunks = range(0, len(records), _CHUNK)
        return chain.from_iterable(self._make(records[i : i + _CHUNK]) for i in chunks)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OnAccess | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (tuple(self),))  # no private class in a user's pickle


class DeploymentRecord(msgspec.Struct, gc=False):
    """A deployment as the model requires it, checked by msgspec."""

    conversation_id: str
    service_id: str
    cellphone: str
    business_scope_id: str | None = None
    username: str | None = None
    status: DeploymentStatus | None = None


class CampaignStatusRecord(msgspec.Struct, gc=False):
    launch_request_id: str
    status: CampaignState
    poll_id: int
    deployments: list[DeploymentRecord]


_read_campaign_status = msgspec.json.Decoder(CampaignStatusRecord).decode
_made_deployments = partial(msgspec.convert, type=list[Deployment], from_attributes=True)


def _decode_campaign_status(body: bytes, status: int, headers: Mapping[str, str]) -> CampaignStatus:
    try:
        read = _read_campaign_status(body)
    except msgspec.MsgspecError:  # the converter names the first problem, as for any model
        return structure(parse_json(body, status, headers), CampaignStatus)
    deployments = OnAccess(_made_deployments, read.deployments)
    return CampaignStatus(read.launch_request_id, read.status, read.poll_id, deployments)


class UserRecord(msgspec.Struct, gc=False):
    country_code: str
    cellphone: str


class SessionRecord(msgspec.Struct, gc=False):
    """A session; its timestamps come as text and are replaced by aware
    datetimes before the model is made (hence ``Any``)."""

    id: str
    created_at: Any
    user: UserRecord
    finished_at: Any = None


class SessionPageRecord(msgspec.Struct, gc=False):
    results: list[SessionRecord]
    next_id: str | None = None


_read_session_page = msgspec.json.Decoder(SessionPageRecord).decode
_made_sessions = partial(msgspec.convert, type=list[SessionMeta], from_attributes=True)


_fromisoformat = datetime.fromisoformat


def _decode_session_page(body: bytes, status: int, headers: Mapping[str, str]) -> SessionPage:
    # Row 7. The timestamps are read here, so that a bad one fails the decode.
    # The service's text carries no offset: stating UTC in the text parses
    # faster (~0.13 us) than replace(tzinfo=UTC) after (~0.7 us), and inline,
    # not in a helper, saves a call per timestamp. Text with an offset, or not
    # text, raises here and goes to the converter, which reads it or names it.
    try:
        read = _read_session_page(body)
        for r in read.results:
            r.created_at = _fromisoformat(r.created_at + "+00:00")
            if r.finished_at is not None:
                r.finished_at = _fromisoformat(r.finished_at + "+00:00")
    except (msgspec.MsgspecError, TypeError, ValueError):
        return structure(parse_json(body, status, headers), SessionPage)
    return SessionPage(OnAccess(_made_sessions, read.results), read.next_id)


_decoders: dict[Any, Decode[Any]] = {
    StatusAnswer: _decode_status_answer,
    CampaignStatus: _decode_campaign_status,
    SessionPage: _decode_session_page,
}
