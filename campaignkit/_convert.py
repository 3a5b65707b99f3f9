"""The one cattrs converter between wire JSON and the models.

Hooks are strict (a number is not a string, a string is not a list), so a
response of the wrong shape is reported with the path of the offending field
instead of being silently coerced.

Well-formed answers of the models msgspec builds exactly as the converter
would (no timestamps, no ``Any``) take a faster road: msgspec decodes the
bytes straight into the attrs classes, in C (see :func:`loader`). Anything it
refuses goes through orjson and the converter, which name the problem.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Callable
from datetime import UTC, datetime
from types import NoneType, UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin, get_type_hints

import attrs
import msgspec
from cattrs import BaseValidationError, transform_error
from cattrs.cols import homogenous_tuple_structure_factory, is_sequence, list_structure_factory
from cattrs.preconf.orjson import make_converter
from cattrs.v import format_exception

from .errors import ResponseError
from .models import SessionMeta, SessionUser, UnixSeconds
from .status import CampaignState, DeploymentStatus

T = TypeVar("T")

converter = make_converter(detailed_validation=True, forbid_extra_keys=False)


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


converter.register_structure_hook_factory(attrs.has, _json_object_of)
converter.register_structure_hook(str, _strict_str)
converter.register_structure_hook(int, _strict_int)
converter.register_structure_hook(DeploymentStatus, _deployment_status)
converter.register_structure_hook(CampaignState, _campaign_state)
converter.register_structure_hook(datetime, _text_datetime)
converter.register_structure_hook_func(_is_unix_time, _unix_datetime)
converter.register_structure_hook_factory(is_sequence, _json_array_of)
converter.register_unstructure_hook(datetime, lambda dt: int(dt.timestamp()))


# A hand-written hook for the class that comes by the ten thousand (a page
# of sessions): cattrs' generated functions with detailed validation cost
# about 4x orjson's parse. It reads only what it can check cheaply; anything
# else (a wrong type, a missing optional field, an offset in the text) goes to
# the detailed hook, which either builds the object too or raises with the
# offending field's path.


def _fast_utc_text(text: str) -> datetime:
    # The service's text carries no offset; stating UTC in the text parses
    # faster than replace(tzinfo=UTC). Text with an offset of its own fails
    # here and is read by the detailed hook.
    return datetime.fromisoformat(text + "+00:00")


def _fast_session_meta(value: dict[str, Any]) -> SessionMeta:
    session_id = value["id"]
    user = value["user"]
    country_code = user["country_code"]
    cellphone = user["cellphone"]
    finished_at = value["finished_at"]
    if not (type(session_id) is str and type(country_code) is str and type(cellphone) is str):
        raise TypeError
    return SessionMeta(
        session_id,
        _fast_utc_text(value["created_at"]),
        SessionUser(country_code, cellphone),
        None if finished_at is None else _fast_utc_text(finished_at),
    )


def _register_fast(cls: type[T], fast: Callable[[dict[str, Any]], T]) -> None:
    """Use ``fast`` for ``cls`` and for arrays of it, the detailed hooks as fallback."""
    array = tuple[cls, ...]  # type: ignore[valid-type]

    def fast_array(items: Any) -> tuple[T, ...]:
        if type(items) is not list:
            raise TypeError
        return tuple([fast(item) for item in items])

    converter.register_structure_hook(cls, _falling_back(fast, converter.get_structure_hook(cls)))
    converter.register_structure_hook_func(
        lambda type_: type_ == array,
        _falling_back(fast_array, converter.get_structure_hook(array)),
    )


def _falling_back(
    fast: Callable[[Any], T], detailed: Callable[[Any, Any], T]
) -> Callable[[Any, Any], T]:
    def structure(value: Any, type_: Any) -> T:
        try:
            return fast(value)
        except (KeyError, TypeError, ValueError, AttributeError):
            return detailed(value, type_)

    return structure


_register_fast(SessionMeta, _fast_session_meta)


def structure(data: Any, cls: type[T]) -> T:
    """Build ``cls`` from decoded JSON, or raise a :class:`ResponseError`
    naming the first offending field's path."""
    return structurer(cls)(data)


_structurers: dict[Any, Callable[[Any], Any]] = {}


def structurer(cls: type[T]) -> Callable[[Any], T]:
    """:func:`structure` for one class, with its hook looked up once."""
    build = _structurers.get(cls)
    if build is None:
        build = _structurers[cls] = _make_structurer(cls)
    return build


def _make_structurer(cls: type[T]) -> Callable[[Any], T]:
    hook = converter.get_structure_hook(cls)

    def build(data: Any) -> T:
        try:
            return hook(data, cls)  # type: ignore[no-any-return]
        except BaseValidationError as exc:
            first = transform_error(exc, path="$", format_exception=_describe)[0]
            message, _, path = first.partition(" @ ")
            raise ResponseError(f"unexpected response shape: {message}", path=path or "$") from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ResponseError(f"unexpected response shape: {exc}", path="$") from None

    return _gc_paused(build)


_loaders: dict[Any, Callable[[bytes], Any] | None] = {}


def loader(cls: type[T]) -> Callable[[bytes], T] | None:
    """msgspec's decoder of ``cls`` straight from JSON bytes, or None where it
    would not build what the converter builds.

    It raises :class:`msgspec.MsgspecError` on anything it refuses; the caller
    then takes the converter's road, which names the problem.
    """
    if cls not in _loaders:
        builds = _msgspec_builds(cls)
        _loaders[cls] = _gc_paused(msgspec.json.Decoder(cls).decode) if builds else None
    return _loaders[cls]


# msgspec reads these as the converter's hooks do (strict types, enums through
# their own lookup, unknown deployment statuses included). Timestamps are left
# out: msgspec has its own text forms and keeps a missing offset naive.
_MSGSPEC_LEAVES: frozenset[Any] = frozenset({str, int, NoneType, DeploymentStatus, CampaignState})


def _msgspec_builds(type_: Any) -> bool:
    if type_ in _MSGSPEC_LEAVES:
        return True
    if attrs.has(type_):
        return all(map(_msgspec_builds, get_type_hints(type_).values()))
    origin, args = get_origin(type_), get_args(type_)
    if origin is list or (origin is tuple and args[1:] == (...,)):
        return _msgspec_builds(args[0])
    if origin is Union or origin is UnionType:
        return all(map(_msgspec_builds, args))
    return False


_MISSING_FIELD = re.compile(r"Object missing required field `(.+)`")


def response_error(exc: msgspec.ValidationError) -> ResponseError:
    """msgspec's refusal of an answer as a :class:`ResponseError` with its path."""
    message, _, at = str(exc).partition(" - at `")
    path = at.rstrip("`") or "$"
    missing = _MISSING_FIELD.fullmatch(message)
    if missing:
        path = f"{path}.{missing[1]}"
    return ResponseError(
        f"unexpected response shape: {message[:1].lower()}{message[1:]}", path=path
    )


def _gc_paused(build: Callable[[Any], T]) -> Callable[[Any], T]:
    """``build`` with the cyclic collector paused while it runs: building up
    to a few hundred thousand objects otherwise makes it scan them again and
    again (10-50% of a decode)."""

    def run(data: Any) -> T:
        collecting = gc.isenabled()
        gc.disable()
        try:
            return build(data)
        finally:
            if collecting:
                gc.enable()

    return run


def _describe(exc: BaseException, type_: Any) -> str:
    # The hooks above say what they expected; cattrs' text covers the rest.
    if isinstance(exc, TypeError) and str(exc).startswith("expected "):
        return str(exc)
    return format_exception(exc, type_)


def json_type(value: object) -> str:
    """How a decoded JSON value is named in error messages."""
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
