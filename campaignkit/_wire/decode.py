"""Every decode of an answer's body, in one voice: a :class:`ResponseError`
that names the offending field's JSON path (``$.deployments[1].status``).

orjson parses and the converter (:mod:`campaignkit._wire.convert`) builds every
resource. The two payloads that come by the ten thousand, a campaign status
and a page of sessions, are read by msgspec into GC-free records instead:
the tracker diffs the status's (:class:`StatusAnswer`), and the models hold
theirs in an :class:`OnAccess` sequence that makes each public object as it
is read. Whatever msgspec refuses goes through the converter, which either
builds it too or names the problem.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, overload

import msgspec
import orjson
from cattrs import BaseValidationError
from cattrs.errors import ClassValidationError, IterableValidationError
from cattrs.v import format_exception

from ..errors import ResponseError
from ..models import CampaignStatus, Deployment, SessionMeta, SessionPage, SessionUser
from ..status import CampaignState, DeploymentStatus
from .convert import converter

T = TypeVar("T")

Decode = Callable[[bytes, int, Mapping[str, str]], T]
"""Reads a 2xx answer's body (given its status and headers) as a model."""


def decoder(cls: type[T]) -> Decode[T]:
    """The decode function of ``cls``, built once."""
    decode = _decoders.get(cls)
    if decode is None:
        decode = _decoders[cls] = _converting(cls)
    return decode


def parse_json(body: bytes, status: int, headers: Mapping[str, str]) -> Any:
    """``body`` as JSON, or a :class:`ResponseError` (without a path) that says
    what came instead."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    if not body:
        what = "an empty body"
    elif "html" in content_type or body.lstrip()[:1] == b"<":
        what = "an HTML page (a proxy or gateway answered?)"
    else:
        what = f"a body that is not JSON ({len(body)} bytes, Content-Type {content_type!r})"
    raise ResponseError(f"expected JSON, got {what}", status=status)


def structure(data: Any, cls: type[T]) -> T:
    """Build ``cls`` from parsed JSON, or raise a :class:`ResponseError` naming
    the first offending field's path."""
    try:
        return converter.structure(data, cls)
    except BaseValidationError as exc:
        path, failure, type_ = _first_failure(exc, "$", cls)
        raise ResponseError(
            f"unexpected response shape: {_describe(failure, type_)}", path=path
        ) from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ResponseError(f"unexpected response shape: {_describe(exc, cls)}", path="$") from None


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


# -- models made on access from GC-free records ----------------------------------
# Rows 1 (decode a 100,000-deployment status) and 7 (iter_sessions): building
# every model of a large answer up front costs more than parsing it, most of it
# in the cyclic GC walking the new tracked objects again and again. msgspec
# reads the answer in C into records declared gc=False (all checks done there,
# the GC never walks them), and the model is made when it is read, so a reader
# that goes through them one by one frees each before the next is made.


class OnAccess(Sequence[T]):
    """A read-only sequence that makes its items from columns of records when
    read. It equals, hashes, shows and pickles as the tuple of its items."""

    __slots__ = ("_build", "_columns")

    def __init__(self, build: Callable[..., T], *columns: Sequence[Any]) -> None:
        self._build = build
        self._columns = columns

    def __len__(self) -> int:
        return len(self._columns[0])

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(map(self._build, *[column[index] for column in self._columns]))
        return self._build(*[column[index] for column in self._columns])

    def __iter__(self) -> Iterator[T]:
        return map(self._build, *self._columns)

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


def _deployment(r: DeploymentRecord) -> Deployment:
    return Deployment(
        r.conversation_id, r.service_id, r.cellphone, r.business_scope_id, r.username, r.status
    )


def _decode_campaign_status(body: bytes, status: int, headers: Mapping[str, str]) -> CampaignStatus:
    try:
        read = _read_campaign_status(body)
    except msgspec.MsgspecError:  # the converter names the first problem, as for any model
        return structure(parse_json(body, status, headers), CampaignStatus)
    deployments = OnAccess(_deployment, read.deployments)
    return CampaignStatus(read.launch_request_id, read.status, read.poll_id, deployments)


class UserRecord(msgspec.Struct, gc=False):
    country_code: str
    cellphone: str


class SessionRecord(msgspec.Struct, gc=False):
    id: str
    created_at: str
    user: UserRecord
    finished_at: str | None = None


class SessionPageRecord(msgspec.Struct, gc=False):
    results: list[SessionRecord]
    next_id: str | None = None


_read_session_page = msgspec.json.Decoder(SessionPageRecord).decode


def _utc(text: str) -> datetime:
    # The service's text carries no offset. Stating UTC in the text parses
    # faster (0.13 us) than replace(tzinfo=UTC) after (0.7 us): row 7.
    return datetime.fromisoformat(text + "+00:00")


def _session(r: SessionRecord, created_at: datetime, finished_at: datetime | None) -> SessionMeta:
    return SessionMeta(
        r.id, created_at, SessionUser(r.user.country_code, r.user.cellphone), finished_at
    )


def _decode_session_page(body: bytes, status: int, headers: Mapping[str, str]) -> SessionPage:
    try:
        read = _read_session_page(body)
        # Timestamps are read here, so a bad one is reported by the decode, not
        # by a later read; text with an offset fails here and goes to the converter.
        created = [_utc(r.created_at) for r in read.results]
        finished = [None if r.finished_at is None else _utc(r.finished_at) for r in read.results]
    except (msgspec.MsgspecError, ValueError):
        return structure(parse_json(body, status, headers), SessionPage)
    return SessionPage(OnAccess(_session, read.results, created, finished), read.next_id)


_decoders: dict[Any, Decode[Any]] = {
    StatusAnswer: _decode_status_answer,
    CampaignStatus: _decode_campaign_status,
    SessionPage: _decode_session_page,
}


# -- one voice for every failure -------------------------------------------------


def _first_failure(exc: BaseException, path: str, type_: Any) -> tuple[str, BaseException, Any]:
    """The path, the exception and the expected type of the first leaf failure
    of a cattrs validation error."""
    if isinstance(exc, IterableValidationError):
        with_index, _ = exc.group_exceptions()
        if with_index:
            item, at = with_index[0]
            return _first_failure(item, f"{path}[{at.index!r}]", at.type)
    elif isinstance(exc, ClassValidationError):
        with_name, _ = exc.group_exceptions()
        if with_name:
            field, named = with_name[0]
            return _first_failure(field, f"{path}.{named.name}", named.type)
    if isinstance(exc, BaseValidationError) and exc.exceptions:
        return _first_failure(exc.exceptions[0], path, type_)
    return path, exc, type_


def _describe(exc: BaseException, type_: Any) -> str:
    # The converter's hooks say what they expected; cattrs' words cover the rest.
    if isinstance(exc, TypeError) and str(exc).startswith("expected "):
        return str(exc)
    return format_exception(exc, type_)
