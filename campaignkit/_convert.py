"""The one cattrs converter between wire JSON and the models.

Hooks are strict (a number is not a string, a string is not a list), so a
response of the wrong shape is reported with the path of the offending field
instead of being silently coerced.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar, get_args, get_origin

import attrs
from cattrs import BaseValidationError, transform_error
from cattrs.cols import homogenous_tuple_structure_factory, is_sequence, list_structure_factory
from cattrs.preconf.orjson import make_converter
from cattrs.v import format_exception

from .errors import ResponseError
from .models import CampaignStatus, Deployment, SessionMeta, SessionUser, UnixSeconds
from .status import KNOWN_WIRE_STATUSES, CampaignState, DeploymentStatus

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


# Hand-written hooks for the classes that come by the hundred thousand (a
# campaign's deployments, a page of sessions): cattrs' generated functions
# with detailed validation cost about 4x orjson's parse. Each fast hook reads
# only what it can check cheaply; anything else (a wrong type, an unknown
# status, a missing optional field) goes to the detailed hook, which either
# builds the object too or raises with the offending field's path.


# attrs' frozen __init__ sets each field through object.__setattr__; setting
# the slots through their descriptors builds a Deployment in 30% less time.
_new = object.__new__
(
    _set_conversation_id,
    _set_service_id,
    _set_cellphone,
    _set_business_scope_id,
    _set_username,
    _set_status,
) = (getattr(Deployment, field.name).__set__ for field in attrs.fields(Deployment))


def _fast_deployment(value: dict[str, Any]) -> Deployment:
    conversation_id = value["conversation_id"]
    service_id = value["service_id"]
    cellphone = value["cellphone"]
    scope = value["business_scope_id"]
    username = value["username"]
    if not (
        type(conversation_id) is str
        and type(service_id) is str
        and type(cellphone) is str
        and (scope is None or type(scope) is str)
        and (username is None or type(username) is str)
    ):
        raise TypeError
    deployment: Deployment = _new(Deployment)
    _set_conversation_id(deployment, conversation_id)
    _set_service_id(deployment, service_id)
    _set_cellphone(deployment, cellphone)
    _set_business_scope_id(deployment, scope)
    _set_username(deployment, username)
    _set_status(deployment, KNOWN_WIRE_STATUSES[value["status"]])
    return deployment


_CAMPAIGN_STATES = {state.value: state for state in CampaignState}


def _fast_campaign_status(value: dict[str, Any]) -> CampaignStatus:
    launch_request_id = value["launch_request_id"]
    poll_id = value["poll_id"]
    deployments = value["deployments"]
    if not (type(launch_request_id) is str and type(poll_id) is int and type(deployments) is list):
        raise TypeError
    return CampaignStatus(
        launch_request_id,
        _CAMPAIGN_STATES[value["status"]],
        poll_id,
        tuple([_fast_deployment(item) for item in deployments]),
    )


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


_register_fast(Deployment, _fast_deployment)
_register_fast(CampaignStatus, _fast_campaign_status)
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
        # Pausing the collector while up to a few hundred thousand objects are
        # built saves it from scanning them again and again (10-50% of a decode).
        collecting = gc.isenabled()
        gc.disable()
        try:
            return hook(data, cls)  # type: ignore[no-any-return]
        except BaseValidationError as exc:
            first = transform_error(exc, path="$", format_exception=_describe)[0]
            message, _, path = first.partition(" @ ")
            raise ResponseError(f"unexpected response shape: {message}", path=path or "$") from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise ResponseError(f"unexpected response shape: {exc}", path="$") from None
        finally:
            if collecting:
                gc.enable()

    return build


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
