"""Every decode of an answer's body, in one voice: a :class:`ResponseError`
that names the offending field's JSON path (``$.deployments[1].status``).

orjson parses and the converter (:mod:`campaignkit._wire.convert`) builds every
resource. The campaign status, the one payload that comes by the hundred
thousand, is read by msgspec into GC-free records (:class:`StatusAnswer`):
the tracker diffs those, and :func:`decoder` converts them to the
:class:`CampaignStatus` model in C. Whatever msgspec refuses goes through the
converter, which either builds it too or names the problem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec
import orjson
from cattrs import BaseValidationError
from cattrs.errors import ClassValidationError, IterableValidationError
from cattrs.v import format_exception

from ..errors import ResponseError
from ..models import CampaignStatus
from ..status import CampaignState
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


def _decode_campaign_status(body: bytes, status: int, headers: Mapping[str, str]) -> CampaignStatus:
    try:
        return msgspec.convert(_read_status_answer(body), CampaignStatus, from_attributes=True)
    except msgspec.MsgspecError:  # the converter names the first problem, as for any model
        return structure(parse_json(body, status, headers), CampaignStatus)


def _converting(cls: type[T]) -> Decode[T]:
    def decode(body: bytes, status: int, headers: Mapping[str, str]) -> T:
        return structure(parse_json(body, status, headers), cls)

    return decode


_decoders: dict[Any, Decode[Any]] = {
    StatusAnswer: _decode_status_answer,
    CampaignStatus: _decode_campaign_status,
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
