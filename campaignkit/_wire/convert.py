"""The one cattrs converter between wire JSON and the models.

Hooks are strict (a number is not a string, a string is not a list), so a
response of the wrong shape is reported with the path of the offending field
instead of being silently coerced: :func:`structure` raises a
:class:`ResponseError` naming it (``$.deployments[1].status``).
:mod:`campaignkit._wire.decode` uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar, get_args, get_origin

import attrs
import msgspec
import orjson
from cattrs import BaseValidationError
from cattrs.cols import homogenous_tuple_structure_factory, is_sequence, list_structure_factory
from cattrs.errors import AttributeValidationNote, ClassValidationError, IterableValidationError
from cattrs.preconf.orjson import make_converter
from cattrs.v import format_exception

from ..errors import ResponseError
from ..models import UnixSeconds
from ..status import CampaignState, DeploymentStatus

T = TypeVar("T")

converter = make_converter(detailed_validation=True, forbid_extra_keys=False)


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


def json_type(value: object) -> str:
    """How a decoded JSON value is named in error messages: in JSON's words
    (a number is shown, never Python's ``float``)."""
    if value is None:
        return "null"
    if type(value) in (int, float):
        return f"a number ({value!r})"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _strict_str(value: object, _: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {json_type(value)}")
    return value


def _strict_int(value: object, _: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {json_type(value)}")
    return value


def _deployment_status(value: object, _: object) -> DeploymentStatus:
    return DeploymentStatus(_strict_str(value, _))


def _campaign_state(value: object, _: object) -> CampaignState:
    return CampaignState(_strict_str(value, _))


def _unix_datetime(value: object, _: object) -> datetime:
    """UNIX seconds (a JSON number) as an aware UTC datetime."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"expected UNIX seconds, got {json_type(value)}")
    return datetime.fromtimestamp(value, UTC)


def _text_datetime(value: object, _: object) -> datetime:
    """ISO 8601 or ``YYYY-MM-DD HH:MM:SS.ffffff`` text (UTC when no offset is
    given) as an aware UTC datetime."""
    parsed = datetime.fromisoformat(_strict_str(value, _))
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _is_unix_time(type_: Any) -> bool:
    return get_origin(type_) is Annotated and UnixSeconds in get_args(type_)[1:]


def _json_array_of(sequence_type: Any) -> Any:
    if get_origin(sequence_type) is list:
        build = list_structure_factory(sequence_type, converter)
    else:
        build = homogenous_tuple_structure_factory(sequence_type, converter)

    def structure(value: object, type_: Any) -> Any:
        if not isinstance(value, list):
            raise TypeError(f"expected an array, got {json_type(value)}")
        return build(value, type_)

    return structure


def _json_object_of(cls: Any) -> Any:
    build = converter.gen_structure_attrs_fromdict(cls)

    def structure(value: object, type_: Any) -> Any:
        # Checked here so that a null or a string in place of an object is
        # reported at its own path, not at its first field's.
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {json_type(value)}")
        return build(value, type_)

    return structure


def _is_struct(type_: Any) -> bool:
    return isinstance(type_, type) and issubclass(type_, msgspec.Struct)


def _json_struct_of(cls: Any) -> Any:
    """The status records built as cattrs builds attrs classes, so that what
    msgspec refuses is reported with the same words and paths."""
    fields = [
        (f.name, f.encode_name, f.type, converter.get_structure_hook(f.type), f.required)
        for f in msgspec.structs.fields(cls)
    ]

    def structure(value: object, _: Any) -> Any:
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {json_type(value)}")
        built: dict[str, Any] = {}
        failures: list[Exception] = []
        for name, key, type_, hook, required in fields:
            if required or key in value:
                try:
                    built[name] = hook(value[key], type_)
                except Exception as exc:
                    note = AttributeValidationNote(f"Structuring @ attribute {key}", key, type_)
                    exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                    failures.append(exc)
        if failures:
            raise ClassValidationError(f"While structuring {cls.__name__}", failures, cls)
        return cls(**built)

    return structure


converter.register_structure_hook_factory(attrs.has, _json_object_of)
converter.register_structure_hook_factory(_is_struct, _json_struct_of)
converter.register_structure_hook(str, _strict_str)
converter.register_structure_hook(int, _strict_int)
converter.register_structure_hook(DeploymentStatus, _deployment_status)
converter.register_structure_hook(CampaignState, _campaign_state)
converter.register_structure_hook(datetime, _text_datetime)
converter.register_structure_hook_func(_is_unix_time, _unix_datetime)
converter.register_structure_hook_factory(is_sequence, _json_array_of)


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
