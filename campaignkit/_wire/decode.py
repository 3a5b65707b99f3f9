"""Every decode of an answer's body, in one voice: a :class:`ResponseError`
that names the offending field's JSON path (``$.deployments[1].status``).

orjson parses and the converter (:mod:`campaignkit._wire.convert`) builds every
resource. The two payloads that come by the ten thousand, a campaign status
and a page of sessions, are read by msgspec into GC-free records instead:
the tracker diffs the status's (:class:`StatusAnswer`), a decoded
:class:`CampaignStatus` holds its deployments' in an :class:`OnAccess`
sequence that makes each :class:`Deployment` as it is read, and a session
page's models are made from its records in C. Whatever msgspec refuses goes
through the converter, which either builds it too or names the problem.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, overload

import msgspec
import orjson

from .._input.validation import Problems, session_keys_wire, user_wire
from ..errors import ResponseError
from ..models import CampaignStatus, Deployment, SessionPage, User
from ..status import CampaignState, DeploymentStatus
from .convert import structure

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
# every model of a large answer in Python costs more than parsing it, much of
# it in the cyclic GC walking the new tracked objects again and again. msgspec
# reads the answer in C into records declared gc=False (all type checks done
# there, the GC never walks them); the models are made from them in C or when
# they are read.


class OnAccess(Sequence[T]):
    """A read-only sequence that makes each item from its record when read (row
    1: a status's deployments cost nothing until read, and a reader that goes
    through them one by one frees each before the next is made). It equals,
    hashes, shows and pickles as the tuple of its items."""

    __slots__ = ("_build", "_records")

    def __init__(self, build: Callable[[Any], T], records: list[Any]) -> None:
        self._build = build
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(map(self._build, self._records[index]))
        return self._build(self._records[index])

    def __iter__(self) -> Iterator[T]:
        return map(self._build, self._records)

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


_fromisoformat = datetime.fromisoformat


def _decode_session_page(body: bytes, status: int, headers: Mapping[str, str]) -> SessionPage:
    # Row 7. The page is eager (a user may hold it), so msgspec.convert makes
    # its models in C, for a third of what attrs' __init__ costs from Python.
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
        return msgspec.convert(read, SessionPage, from_attributes=True)
    except (msgspec.MsgspecError, TypeError, ValueError):
        return structure(parse_json(body, status, headers), SessionPage)


_decoders: dict[Any, Decode[Any]] = {
    StatusAnswer: _decode_status_answer,
    CampaignStatus: _decode_campaign_status,
    SessionPage: _decode_session_page,
}


# -- a campaign's users, the other way: the send body ----------------------------
# Row 5 (build a 1,000-user send body). validation.user_wire checks one user
# and makes the paths of its fields up front (two strings a user). The common
# user (a cellphone of 4 to 15 ASCII digits, a country code already seen valid,
# no deployment_eta) is read inline here, its session keys by
# session_keys_wire; any other user, or one whose keys have a problem, goes
# through user_wire, which reports each problem with its path.

_VALID_COUNTRY_CODES: set[str] = set()  # a campaign has few; at most 11,110 exist


def users_wire(users: tuple[Any, ...], problems: Problems) -> list[dict[str, Any]]:
    """What :func:`campaignkit._input.validation.users_wire` returns (the wire
    list of users, problems added with ``users[i]`` paths), sooner."""
    wire: list[dict[str, Any]] = []
    key_problems: Problems = []
    for index, user in enumerate(users):
        if type(user) is User and user.deployment_eta is None:
            cellphone, country_code = user.cellphone, user.country_code
            if (
                type(cellphone) is str
                and cellphone.isascii()
                and cellphone.isdigit()
                and 4 <= len(cellphone) <= 15
                and type(country_code) is str
                and country_code in _VALID_COUNTRY_CODES
            ):
                keys = session_keys_wire(user.user_session_keys, "", key_problems)
                if not key_problems:
                    wire.append(
                        {
                            "cellphone": cellphone,
                            "country_code": country_code,
                            "user_session_keys": keys,
                        }
                    )
                    continue
                key_problems.clear()
        entry = user_wire(user, f"users[{index}]", problems)
        if entry is not None:
            _VALID_COUNTRY_CODES.add(entry["country_code"])
            wire.append(entry)
    return wire
