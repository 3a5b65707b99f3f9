"""Property tests: wire dicts of every resource decode; mutations fail with a
ResponseError naming the field; any input validates or raises ValidationError.

Decoding goes through the wire layer's decoder, from bytes: orjson and the
converter for every resource, msgspec's records first for the campaign
status. The campaign status's two roads are also compared directly."""

from __future__ import annotations

import asyncio
import pickle
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import aiohttp
import attrs
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaignkit import (
    Agent,
    CampaignAck,
    CampaignClient,
    CampaignStatus,
    Deployment,
    DeploymentStatus,
    HistoryEntry,
    LegacyDeployment,
    Message,
    Poll,
    ResponseError,
    SessionKey,
    SessionMeta,
    SessionPage,
    SessionUpdate,
    SessionUser,
    Tag,
    User,
    ValidationError,
    deployment_squad,
)
from campaignkit._input import validation
from campaignkit._wire import body as send_body
from campaignkit._wire import sansio as wire
from campaignkit._wire.convert import structure

settings.register_profile(
    "campaignkit-models",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("campaignkit-models")

STATUS_VALUES = [m.value for m in DeploymentStatus] + ["PUSH_NOTIFATION"]

# field -> (kind, required, nullable); kinds name a JSON shape of the spec's tables.
Schema = dict[str, tuple[Any, bool, bool]]
SCHEMAS: dict[type, Schema] = {
    Poll: {"id": ("int", True, False), "name": ("str", True, False)},
    CampaignAck: {
        name: ("str", True, False)
        for name in ("message", "id", "batch_id", "launch_request_id", "status_url")
    },
    Deployment: {
        "conversation_id": ("str", True, False),
        "service_id": ("str", True, False),
        "cellphone": ("str", True, False),
        "business_scope_id": ("str", False, True),
        "username": ("str", False, True),
        "status": ("status", False, True),
    },
    CampaignStatus: {
        "launch_request_id": ("str", True, False),
        "status": ("state", True, False),
        "poll_id": ("int", True, False),
        "deployments": (("list", Deployment), True, False),
    },
    SessionUser: {"country_code": ("str", True, False), "cellphone": ("str", True, False)},
    SessionMeta: {
        "id": ("str", True, False),
        "created_at": ("text_time", True, False),
        "finished_at": ("text_time", False, True),
        "user": (("obj", SessionUser), True, False),
    },
    SessionPage: {"results": (("list", SessionMeta), True, False), "next_id": ("str", False, True)},
    Message: {
        "type": ("str", True, False),
        "sender": ("str", True, False),
        "text": ("str", True, False),
        "file_url": ("str", False, True),
        "created_at": ("unix", True, False),
        "delivered_at": ("unix", False, True),
        "read_at": ("unix", False, True),
        "extra": ("any", False, True),
    },
    HistoryEntry: {"type": ("str", True, False), "message": (("obj", Message), True, False)},
    Tag: {"id": ("int", True, False), "name": ("str", True, False)},
    Agent: {
        "id": ("int", True, False),
        "first_name": ("str", True, False),
        "last_name": ("str", True, False),
        "email": ("str", True, False),
        "tags": (("list", Tag), False, False),
    },
    SessionUpdate: {"message": ("str", True, False), "session_id": ("str", True, False)},
    LegacyDeployment: {
        "message": ("str", True, False),
        "id": ("str", True, False),
        "batch_id": ("str", True, False),
        "new_last_scheduleded_deployment": ("text_time", True, False),
        "conversations_id": ("list_str", True, False),
    },
}
RESOURCES = [
    CampaignAck,
    CampaignStatus,
    SessionPage,
    HistoryEntry,
    Agent,
    Poll,
    SessionUpdate,
    LegacyDeployment,
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
times = st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2100, 1, 1))


def text_time(dt: datetime, style: int) -> str:
    if style == 0:
        return dt.strftime("%Y-%m-%d %H:%M:%S.%f")  # the session listing's form
    if style == 1:
        return dt.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")
    return dt.replace(tzinfo=timezone(timedelta(hours=-5))).isoformat()


def value_of(kind: Any) -> st.SearchStrategy[Any]:
    if isinstance(kind, tuple):
        shape, cls = kind
        return st.lists(wire_dict(cls), max_size=3) if shape == "list" else wire_dict(cls)
    return {
        "str": st.text(max_size=20),
        "int": st.integers(-(2**63), 2**63 - 1),
        "unix": st.integers(0, 4_102_444_800) | st.floats(0, 4.1e9),
        "text_time": st.builds(text_time, times, st.integers(0, 2)),
        "state": st.sampled_from(["PENDING", "CLAIMED", "DONE"]),
        "status": st.sampled_from(STATUS_VALUES)
        | st.from_regex(r"NEW_STATUS_[A-C]", fullmatch=True),
        "list_str": st.lists(st.text(max_size=10), max_size=3),
        "any": json_values,
    }[kind]


@st.composite
def wire_dict(draw: st.DrawFn, cls: type) -> dict[str, Any]:
    schema = SCHEMAS[cls]
    data: dict[str, Any] = {}
    for name, (kind, required, nullable) in schema.items():
        if not required and draw(st.booleans()):
            continue
        data[name] = None if nullable and draw(st.booleans()) else draw(value_of(kind))
    extras = draw(
        st.dictionaries(
            st.text(max_size=8).filter(lambda k: k not in schema), json_values, max_size=2
        )
    )
    return {**extras, **data}


def locations(cls: type, data: dict[str, Any], path: str) -> list[tuple[str, Any, Any, bool, bool]]:
    """Every field of ``data`` (nested too): (path, container, key, required, nullable)."""
    found: list[tuple[str, Any, Any, bool, bool]] = []
    for name, (kind, required, nullable) in SCHEMAS[cls].items():
        if name not in data:
            continue
        field_path = f"{path}.{name}"
        found.append((field_path, data, name, required, nullable))
        if isinstance(kind, tuple) and data[name] is not None:
            shape, inner = kind
            items = data[name] if shape == "list" else [data[name]]
            for index, item in enumerate(items):
                item_path = f"{field_path}[{index}]" if shape == "list" else field_path
                found += locations(inner, item, item_path)
    return found


def kind_at(cls: type, path: str) -> Any:
    for part in path.removeprefix("$.").split("."):
        kind = SCHEMAS[cls][part.partition("[")[0]][0]
        if isinstance(kind, tuple):
            cls = kind[1]
    return kind


# The integers JSON carries (orjson writes none wider than 64 bits).
json_ints = st.integers(-(2**63), 2**63 - 1)


def wrong_values(kind: Any) -> st.SearchStrategy[Any]:
    """JSON values of another type than ``kind`` (never null: nulling is its own mutation)."""
    scalars: dict[str, st.SearchStrategy[Any]] = {
        "str": json_ints
        | st.booleans()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.just([])
        | st.just({}),
        "int": st.text(max_size=5)
        | st.booleans()
        | st.floats(0.5, 1e6)
        | st.just([])
        | st.just({}),
        "unix": st.text(max_size=5) | st.booleans() | st.just([1]) | st.just({}),
    }
    if isinstance(kind, tuple):
        extra: st.SearchStrategy[Any] = st.just([]) if kind[0] == "obj" else st.just({})
        return st.text(max_size=5) | json_ints | st.booleans() | extra
    if kind in ("text_time", "state", "status"):
        return scalars["str"]
    if kind == "list_str":
        return st.text(max_size=5) | json_ints | st.just({}) | st.just([1, 2])
    return scalars[kind]


def decode(data: Any, cls: type) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # unknown statuses warn once
        return wire.decoder(cls)(orjson.dumps(data), 200, {})


# The two answers msgspec reads into GC-free records, and where their items are.
RECORDED = {CampaignStatus: "deployments", SessionPage: "results"}


@pytest.mark.parametrize("cls", list(RECORDED), ids=lambda c: c.__name__)
@given(data=st.data())
def test_both_roads_build_the_same_model(cls: type, data: st.DataObject) -> None:
    # msgspec's records (a status's deployments made on access, a page's
    # sessions made in C) and orjson + the converter (the road of whatever
    # msgspec refuses) agree on every valid answer, and the sequence of
    # deployments made on access keeps the contract of the tuple it replaces.
    payload = data.draw(wire_dict(cls))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fast, eager = decode(payload, cls), cast(Any, structure(payload, cls))
    assert fast == eager
    assert eager == fast
    assert hash(fast) == hash(eager)
    assert repr(fast) == repr(eager)
    assert pickle.loads(pickle.dumps(fast)) == eager
    assert attrs.evolve(fast) == eager
    items, expected = getattr(fast, RECORDED[cls]), getattr(eager, RECORDED[cls])
    assert isinstance(expected, tuple)
    assert isinstance(items, Sequence)
    assert len(items) == len(expected)
    assert list(items) == list(expected)
    assert items[:] == expected
    assert items[1::2] == expected[1::2]
    assert list(reversed(items)) == list(reversed(expected))
    for index in range(-len(expected), len(expected)):
        assert items[index] == expected[index]
        assert hash(items[index]) == hash(expected[index])
        assert items[index] in items
        assert attrs.evolve(items[index]) == expected[index]
    with pytest.raises(IndexError):
        items[len(expected)]
    assert items != list(expected)  # a tuple is not equal to a list either


def test_deployments_made_on_access_differ_as_their_tuples_do() -> None:
    body = {"launch_request_id": "l", "status": "DONE", "poll_id": 1}
    one = {"conversation_id": "c", "service_id": "s", "cellphone": "1", "status": "SENT"}
    two = {**one, "conversation_id": "d"}
    read = decode({**body, "deployments": [one, two]}, CampaignStatus)
    other = decode({**body, "deployments": [one, {**two, "status": "READ"}]}, CampaignStatus)
    assert read != other
    assert read.deployments != other.deployments
    assert read.deployments[:1] == other.deployments[:1]
    assert read.deployments != read.deployments[:1]
    assert read != attrs.evolve(read, deployments=read.deployments[:1])
    assert {read, other, decode({**body, "deployments": [one, two]}, CampaignStatus)} == {
        read,
        other,
    }
    assert type(pickle.loads(pickle.dumps(read.deployments))) is tuple


@pytest.mark.parametrize("cls", list(RECORDED), ids=lambda c: c.__name__)
@given(data=st.data())
def test_a_mutated_answer_fails_alike_on_both_roads(cls: type, data: st.DataObject) -> None:
    payload = data.draw(wire_dict(cls))
    _, container, key, _, _ = data.draw(st.sampled_from(locations(cls, payload, "$")))
    container[key] = data.draw(json_values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected: Any
        try:
            expected = structure(payload, cls)
        except ResponseError as exc:
            expected = (exc.path, str(exc))
        got: Any
        try:
            got = decode(payload, cls)
        except ResponseError as exc:
            got = (exc.path, str(exc))
    assert got == expected


@pytest.mark.parametrize("cls", RESOURCES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_valid_wire_dicts_decode(cls: type, data: st.DataObject) -> None:
    payload = data.draw(wire_dict(cls))
    result = decode(orjson.loads(orjson.dumps(payload)), cls)
    assert isinstance(result, cls)
    for name, (kind, _, _) in SCHEMAS[cls].items():
        if name in payload and kind in ("str", "int", "list_str") and payload[name] is not None:
            value = getattr(result, name)
            assert (list(value) if kind == "list_str" else value) == payload[name]
    if isinstance(result, CampaignStatus):
        for wire_item, item in zip(payload["deployments"], result.deployments, strict=True):
            status = wire_item.get("status")
            if status is None:
                assert item.status is None
            else:
                expected = "PUSH_NOTIFICATION" if status == "PUSH_NOTIFATION" else status
                assert item.status is not None
                assert item.status.value == expected
                assert item.status.is_unknown is status.startswith("NEW_STATUS_")


@pytest.mark.parametrize("cls", [Poll, Agent, HistoryEntry], ids=lambda c: c.__name__)
@given(data=st.data())
def test_valid_wire_arrays_decode(cls: type, data: st.DataObject) -> None:
    payload = data.draw(st.lists(wire_dict(cls), max_size=4))
    result = decode(payload, list[cls])  # type: ignore[valid-type]
    assert len(result) == len(payload)
    assert all(isinstance(item, cls) for item in result)


def test_timestamps_are_aware_utc() -> None:
    meta = decode(
        {
            "id": "s",
            "created_at": "2024-03-01 10:20:30.500000",
            "user": {"country_code": "+1", "cellphone": "5"},
        },
        SessionMeta,
    )
    assert meta.created_at == datetime(2024, 3, 1, 10, 20, 30, 500000, tzinfo=UTC)
    legacy = decode(
        {
            "message": "m",
            "id": "1",
            "batch_id": "b",
            "conversations_id": [],
            "new_last_scheduleded_deployment": "2026-01-01T00:00:00-05:00",
        },
        LegacyDeployment,
    )
    assert legacy.new_last_scheduleded_deployment == datetime(2026, 1, 1, 5, tzinfo=UTC)
    assert legacy.new_last_scheduleded_deployment.tzinfo is UTC


@pytest.mark.parametrize("cls", RESOURCES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_mutating_a_field_fails_with_its_path(cls: type, data: st.DataObject) -> None:
    payload = data.draw(wire_dict(cls))
    options = []
    for path, container, key, required, nullable in locations(cls, payload, "$"):
        if required:
            options.append(("delete", path, container, key))
        if not nullable:
            options.append(("null", path, container, key))
        if kind_at(cls, path) != "any":
            options.append(("swap", path, container, key))
    how, path, container, key = data.draw(st.sampled_from(options))
    if how == "delete":
        del container[key]
    elif how == "null":
        container[key] = None
    else:
        container[key] = data.draw(wrong_values(kind_at(cls, path)))
    with pytest.raises(ResponseError) as caught:
        decode(payload, cls)
    # The field itself, or the element of an array that has the wrong type.
    assert caught.value.path is not None, (how, caught.value)
    assert caught.value.path == path or caught.value.path.startswith(f"{path}["), (
        how,
        caught.value,
    )
    assert caught.value.path in str(caught.value)


@pytest.mark.parametrize("cls", [*RESOURCES, list[Poll], list[Agent], list[HistoryEntry]], ids=str)
@given(value=json_values)
def test_any_json_decodes_or_raises_response_error(cls: type, value: Any) -> None:
    try:
        decode(value, cls)
    except ResponseError as exc:
        path = exc.path
    else:
        return
    assert path is not None
    assert path.startswith("$")


REQUEST = wire.build_request(
    __import__("campaignkit").ClientConfig("k", base_url="https://x.example"), wire.LIST_POLLS
)


@given(status=st.integers(100, 599), body=st.binary(max_size=64) | json_values.map(orjson.dumps))
def test_any_answer_reads_or_raises_a_campaignkit_error(status: int, body: bytes) -> None:
    import campaignkit

    try:
        wire.read_response(REQUEST, status, {}, body, wire.decoder(list[Poll]))
    except campaignkit.CampaignKitError as exc:
        error: Exception = exc
    else:
        assert 200 <= status < 300
        return
    if 200 <= status < 300:
        assert isinstance(error, ResponseError)
    else:
        assert isinstance(error, campaignkit.APIError)
        assert error.status == status


# -- user input ------------------------------------------------------------------


class _Reached(Exception):
    """Raised by the stub session: validation passed and a request was built."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = kwargs


class _StubSession:
    closed = False

    def request(self, method: str, url: Any, **kwargs: Any) -> Any:
        raise _Reached({"method": method, "url": str(url), **kwargs})


anything = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.binary(max_size=4)
    | st.lists(st.integers(), max_size=2)
)
phones = st.from_regex(r"[0-9 ()\-]{0,18}", fullmatch=True) | st.text(max_size=18) | anything
codes = st.from_regex(r"\+?[0-9]{0,5}", fullmatch=True) | anything
etas = (
    st.none() | st.integers(-5, 2**40) | st.datetimes(timezones=st.none() | st.just(UTC)) | anything
)
keys = (
    st.dictionaries(st.text(max_size=8), st.text(max_size=8) | anything, max_size=3)
    | st.lists(
        st.builds(SessionKey, st.text(max_size=8) | anything, st.text(max_size=8) | anything)
        | anything,
        max_size=3,
    )
    | anything
)
users = st.builds(
    User, cellphone=phones, country_code=codes, user_session_keys=keys, deployment_eta=etas
)
user_lists = st.lists(users | anything, max_size=4) | anything


plain_users = st.builds(
    User,
    cellphone=st.from_regex(r"[0-9]{4,15}", fullmatch=True),
    country_code=st.sampled_from(["+1", "+57", "+52", "+1234"]),
    user_session_keys=keys,
)


def reference(given: tuple[Any, ...]) -> tuple[bytes, list[tuple[str, str]]]:
    """The users' wire JSON and problems as validation builds them, user by user."""
    problems: list[tuple[str, str]] = []
    checked = [validation.user_wire(user, f"users[{i}]", problems) for i, user in enumerate(given)]
    return orjson.dumps([entry for entry in checked if entry is not None]), problems


@given(given_users=st.lists(plain_users | users | anything, max_size=6))
@settings(max_examples=150)
def test_the_send_bodys_inline_road_builds_what_validation_builds(given_users: Any) -> None:
    # The body is built a user at a time inline (row 6), or at once (row 5);
    # the result, the problems and their paths are validation's, whatever the input.
    given = tuple(given_users)
    inline_problems: list[tuple[str, str]] = []
    inline = [send_body.user_wire_at(user, i, inline_problems) for i, user in enumerate(given)]
    problems: list[tuple[str, str]] = []
    at_once = send_body.users_wire(given, problems)
    expected, expected_problems = reference(given)
    assert orjson.dumps([entry for entry in inline if entry is not None]) == expected
    assert orjson.dumps(at_once) == expected
    assert inline_problems == problems == expected_problems


# Common users, one of them changed in one place, near a limit or to a form
# the checks know: what the whole-body road must take or hand on exactly as
# validation does (any other user would hide the change by handing it on).
@attrs.frozen
class LookAlike:
    """Reads like a SessionKey (or, with its fields, a User) but is none."""

    key: Any = "name"
    value: Any = "Ana"
    type: Any = None


@attrs.frozen(kw_only=True)
class UserLookAlike:
    cellphone: Any = "3001234567"
    country_code: Any = "+57"
    user_session_keys: Any = ()
    deployment_eta: Any = None


class Subclass(User):
    pass


wire_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
not_text = st.sampled_from(["\ud800", b"k", 5, None])
key_names = st.sampled_from(
    ["", "k" * 128, "k" * 129, "é" * 128, "é" * 129, "deployment_squad", '"\\\x00']
)
key_values = st.sampled_from(["v" * 4096, "v" * 4097, "é" * 4097, "\x7f\u2028\x1f"])
common_key = st.builds(SessionKey, st.from_regex(r"[a-z_]{1,8}", fullmatch=True), wire_text)
edge_key = (
    st.builds(lambda key, text: attrs.evolve(key, key=text), common_key, key_names | not_text)
    | st.builds(lambda key, text: attrs.evolve(key, value=text), common_key, key_values | not_text)
    | st.builds(lambda key, text: attrs.evolve(key, type=text), common_key, wire_text | not_text)
    | st.builds(SessionKey, st.just("deployment_squad"), st.from_regex(r"DS_[0-9]{1,3}|DS_x"))
    | st.builds(LookAlike)
    | st.just({"key": "name", "value": "Ana"})
)
common_user = st.builds(
    User,
    cellphone=st.from_regex(r"[0-9]{4,15}", fullmatch=True),
    country_code=st.sampled_from(["+1", "+57", "+1234"]),
    user_session_keys=st.lists(common_key, max_size=3),
    deployment_eta=st.none() | st.integers(0, 2**40),
)
edge_change = st.one_of(
    st.fixed_dictionaries(
        {
            "cellphone": st.sampled_from(["123", "1234", "1" * 15, "1" * 16])
            | st.sampled_from(
                [
                    "300 123 4567",
                    "3001234567\n",
                    "\u0663\u0660\u0660\u0661",
                    "\uff13\uff10\uff10\uff11",
                ]
            )
            | anything
        }
    ),
    st.fixed_dictionaries(
        {
            "country_code": st.sampled_from(["+12345", "57", "+\u0665\u0667", "+57\n", "+"])
            | anything
        }
    ),
    st.fixed_dictionaries(
        {
            "deployment_eta": st.sampled_from([-1, 2**63 - 1, 2**63, 2**64, True, 1.5])
            | st.datetimes(timezones=st.none() | st.just(UTC))
        }
    ),
    st.builds(
        lambda keys, key: {"user_session_keys": [*keys, key]},
        st.lists(common_key, max_size=2),
        edge_key,
    ),
)


@st.composite
def edge_users(draw: st.DrawFn) -> list[Any]:
    given: list[Any] = draw(st.lists(common_user, min_size=1, max_size=4))
    at = draw(st.integers(0, len(given) - 1))
    kind = draw(st.sampled_from(["field", "field", "field", "subclass", "look-alike", "dict"]))
    user = given[at]
    fields = attrs.asdict(user, recurse=False)
    if kind == "field":
        given[at] = attrs.evolve(user, **draw(edge_change))
    elif kind == "subclass":
        given[at] = Subclass(**fields)
    elif kind == "look-alike":
        given[at] = UserLookAlike(**fields)
    else:
        given[at] = fields
    return given


@given(given_users=edge_users())
@settings(max_examples=400)
def test_the_whole_body_road_builds_what_validation_builds(given_users: list[Any]) -> None:
    given = tuple(given_users)
    problems: list[tuple[str, str]] = []
    at_once = send_body.users_wire(given, problems)
    expected, expected_problems = reference(given)
    assert orjson.dumps(at_once) == expected
    assert problems == expected_problems


COMMON = User(cellphone="3001234567", country_code="+57", user_session_keys={"name": "Ana"})
EDGE_KEYS: list[Any] = [
    *(SessionKey(name, "v") for name in ["", "k" * 128, "k" * 129, "é" * 129, "deployment_squad"]),
    *(SessionKey("k", value) for value in ["v" * 4096, "v" * 4097, "é" * 4097, "\ud800", '"\\']),
    *(SessionKey("k", "v", kind) for kind in ["", "location", "\ud800"]),
    *(SessionKey(5, "v"), SessionKey("k", 5), SessionKey("k", "v", 5)),  # type: ignore[arg-type]
    SessionKey("deployment_squad", "DS_3001234567"),
    LookAlike(),
    {"key": "name", "value": "Ana"},
]
EDGE_CHANGES: list[dict[str, Any]] = [
    *(
        {"cellphone": phone}
        for phone in ["123", "1234", "1" * 15, "1" * 16, "300 123", "\uff13" * 4]
    ),
    *({"country_code": code} for code in ["+1234", "+12345", "57", "+\u0665\u0667", "+57\n"]),
    *({"deployment_eta": eta} for eta in [-1, 0, 2**63 - 1, 2**63, True, 1.5, datetime.now(UTC)]),
    *({"user_session_keys": [SessionKey("a", "b"), key]} for key in EDGE_KEYS),
    # Kept as given by User's converter, empty: only the text is a problem.
    *({"user_session_keys": keys} for keys in ["", b"", {}, ()]),
]


EDGE_USERS: list[Any] = [
    *(attrs.evolve(COMMON, **change) for change in EDGE_CHANGES),
    Subclass(cellphone="3001234567", country_code="+57"),
    UserLookAlike(),
    {"cellphone": "3001234567", "country_code": "+57"},
]


@pytest.mark.parametrize("user", EDGE_USERS, ids=lambda user: repr(user)[:60])
def test_a_user_near_a_limit_reads_as_validation_reads_it(user: Any) -> None:
    given = (COMMON, user, COMMON)
    problems: list[tuple[str, str]] = []
    at_once = send_body.users_wire(given, problems)
    expected, expected_problems = reference(given)
    assert orjson.dumps(at_once) == expected
    assert problems == expected_problems


def test_common_users_take_the_whole_body_road() -> None:
    given = (
        User(cellphone="3001234567", country_code="+57", user_session_keys={"name": "Ana"}),
        User(
            cellphone="5512345678",
            country_code="+52",
            user_session_keys=[SessionKey("sitio", "Bogotá \u2028", "location")],
            deployment_eta=1_900_000_000,
        ),
    )
    problems: list[tuple[str, str]] = []
    assert isinstance(send_body.users_wire(given, problems), orjson.Fragment)
    assert not problems
    # Separators to remove, or a deployment_squad to check: user by user.
    for other in (
        attrs.evolve(given[0], cellphone="300 123 4567"),
        attrs.evolve(given[0], user_session_keys=[deployment_squad("3001234567")]),
    ):
        assert isinstance(send_body.users_wire((other,), problems), list)
    assert not problems


@pytest.mark.parametrize("counts", [(0, 0, 0), (2, 2, 2), (1, 0, 3), (3, 1, 1)])
def test_the_whole_body_road_keeps_each_users_keys(counts: tuple[int, ...]) -> None:
    # The keys are read as one column and cut back per user: in C when the
    # users carry as many keys each, else by slices.
    given = tuple(
        User(
            cellphone=f"300123456{i}",
            country_code="+57",
            user_session_keys=[SessionKey(f"k{j}", f"user {i} key {j}") for j in range(count)],
            deployment_eta=None if i else 1_900_000_000,
        )
        for i, count in enumerate(counts)
    )
    problems: list[tuple[str, str]] = []
    at_once = send_body.users_wire(given, problems)
    assert isinstance(at_once, orjson.Fragment)
    assert orjson.dumps(at_once) == reference(given)[0]
    assert not problems


def test_session_keys_swapped_for_an_iterator_go_user_by_user_unread() -> None:
    # A frozen User changed behind its back: the whole-body road must not
    # consume the iterator before handing the users on (here, to name the
    # second user's cellphone), or the first user's keys would be lost.
    def given() -> tuple[User, ...]:
        swapped = User(cellphone="3001234567", country_code="+57")
        object.__setattr__(swapped, "user_session_keys", iter([SessionKey("name", "Ana")]))
        return swapped, User(cellphone="12", country_code="+57")

    problems: list[tuple[str, str]] = []
    at_once = send_body.users_wire(given(), problems)
    expected, expected_problems = reference(given())
    assert orjson.dumps(at_once) == expected
    assert b'"name"' in expected
    assert problems == expected_problems
    assert [path for path, _ in problems] == ["users[1].cellphone"]


def test_deployment_eta_beyond_64_bits_is_a_named_problem() -> None:
    # orjson refused it with a TypeError from send_campaign.
    user = User(cellphone="3001234567", country_code="+57", deployment_eta=2**64)
    with pytest.raises(ValidationError) as caught:
        run(lambda client: client.send_campaign(7, [user]))
    assert [path for path, _ in caught.value.problems] == ["users[0].deployment_eta"]


def run(call: Any) -> Any:
    async def main() -> Any:
        client = CampaignClient(
            "k",
            base_url="https://x.example",
            campaign_url="https://c.example",
            session=cast(aiohttp.ClientSession, _StubSession()),
        )
        async with client:
            return await call(client)

    return asyncio.run(main())


def validates_or_raises(call: Any) -> dict[str, Any] | None:
    try:
        run(call)
    except ValidationError as exc:
        problems = exc.problems
    except _Reached as reached:
        return reached.kwargs
    else:
        raise AssertionError("neither validated nor refused")
    assert problems
    assert all(isinstance(path, str) and path for path, _ in problems)
    return None


@given(poll_id=st.text(max_size=6) | st.integers() | anything, given_users=user_lists)
@settings(max_examples=80)
def test_any_send_input_validates_or_raises_validation_error(
    poll_id: Any, given_users: Any
) -> None:
    sent = validates_or_raises(lambda c: c.send_campaign(poll_id, given_users))
    if sent is not None:
        body = orjson.loads(sent["data"])
        assert len(body["users"]) == len(given_users)
        for user in body["users"]:
            assert user["cellphone"].isdigit()
            assert user["country_code"].startswith("+")


@given(external_id=st.text(max_size=8) | anything, session_keys=keys)
def test_any_update_input_validates_or_raises_validation_error(
    external_id: Any, session_keys: Any
) -> None:
    sent = validates_or_raises(lambda c: c.update_session(external_id, session_keys))
    if sent is not None:
        assert orjson.loads(sent["data"])["user_session_keys"] is not None


stamps = (
    st.none() | st.integers(-5, 2**40) | st.datetimes(timezones=st.none() | st.just(UTC)) | anything
)


@given(
    start=stamps,
    end=stamps,
    limit=st.none() | st.integers(-2, 10_002) | anything,
    cursor=st.none() | st.text(max_size=6) | anything,
)
def test_any_listing_input_validates_or_raises_validation_error(
    start: Any, end: Any, limit: Any, cursor: Any
) -> None:
    sent = validates_or_raises(
        lambda c: c.list_sessions(1, start=start, end=end, limit=limit, cursor=cursor)
    )
    if sent is not None and limit is not None:
        assert 1 <= limit <= 10_000
