"""The planner's batch road (row 17): ``take_many`` files any inputs exactly
as ``take`` files them one at a time (the same chunks, wire JSON byte for
byte, invalid and repeated inputs, deferrals), whatever they are, and the
seen-phone sets and the memory ledger's index answer a batch as they answer
a phone at a time."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from helpers.phones import example
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit import SessionKey, User
from campaignkit._input.phones import PhoneSet
from campaignkit.bulk import InvalidInput, PlannedChunk, Planner
from campaignkit.ledger._memory_index import Index
from campaignkit.ledger._memory_runs import RunState

pytestmark = pytest.mark.timeout(300)


def forms(region: str) -> list[tuple[str, str]]:
    """Ways of writing one mobile of ``region``: as the service gets it, and
    as people write it (separators, a trunk prefix, the country code again,
    WhatsApp's forms of the line)."""
    code, national = example(region)
    written = [
        (code, national),
        (code, f"{national[:3]} {national[3:6]}-{national[6:]}"),
        (code, code[1:] + national),
        ("+0" + code[1:], national),
    ]
    if region in ("GB", "AU", "CO"):
        written.append((code, "0" + national))
    if region == "MX":
        written.append((code, "1" + national))
    if region == "AR":  # the mobile 9, or not
        written.append((code, national[1:] if national[0] == "9" else "9" + national))
    if region == "BR":  # the ninth digit, or not
        written.append((code, national[:2] + national[3:]))
    return written


REGIONS = ("CO", "GB", "MX", "AR", "BR", "US", "AU", "IN")


@st.composite
def numbers(draw: st.DrawFn, plain: bool = False) -> tuple[str, str]:
    """One of a few people (so that some come again), written some way
    (``plain``: as the service gets it)."""
    region = draw(st.sampled_from(REGIONS))
    code, national = forms(region)[0] if plain else draw(st.sampled_from(forms(region)))
    person = draw(st.integers(0, 3))
    if person and national[-1].isdigit():
        national = national[:-1] + str(person)  # another person of the same form
    return code, national


bad_numbers = st.sampled_from(
    [("+57", "12"), ("+57", "300123456x"), ("+999", "3001234567"), ("57", "3001234567"),
     ("+57", "\u0663\u0660\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667"), ("+57", 3001234567),
     ("+57", "")]
)  # fmt: skip
plain_keys = st.lists(
    st.builds(
        SessionKey,
        st.sampled_from(["name", "plan", "tz"]),
        st.sampled_from(["Ana", "gold", "", 'say "hi"\\', "Zoë", "\u2028\x1f\x7f", "日本"]),
    ),
    max_size=3,
)
odd_keys = st.sampled_from(
    [
        (SessionKey("k", "v", "location"),),
        (SessionKey("deployment_squad", "DS_1"),),
        (SessionKey("k", "\ud800"),),
        (SessionKey("k" * 129, "v"),),
        (SessionKey("k", "v" * 4097),),
        (SessionKey("", "v"),),
        ({"key": "name", "value": "Ana"},),
    ]
)
etas = st.none() | st.sampled_from([0, 1_900_000_000, -1, datetime(2030, 1, 1, tzinfo=UTC)])


class Subclass(User):
    pass


@st.composite
def items(draw: st.DrawFn, common: int) -> Any:
    """An input item: a common user ``common`` times in ``common + 5``, else
    a user whose number is written another way or anything else."""
    kind = draw(
        st.sampled_from(["user"] * common + ["written", "odd user", "dict", "invalid", "other"])
    )
    code, cellphone = draw(numbers(plain=kind == "user"))
    if kind in ("user", "written"):
        return User(cellphone=cellphone, country_code=code, user_session_keys=draw(plain_keys))
    if kind == "odd user":
        number: tuple[Any, Any] = draw(st.just((code, cellphone)) | bad_numbers)
        user_type = draw(st.sampled_from([User, User, Subclass]))
        keys: Any = draw(plain_keys | odd_keys)
        eta: Any = draw(etas)
        return user_type(
            cellphone=number[1], country_code=number[0], user_session_keys=keys, deployment_eta=eta
        )
    if kind == "dict":
        return draw(
            st.sampled_from(
                [
                    {"cellphone": cellphone, "country_code": code},
                    {"cellphone": cellphone, "country_code": code, "user_session_keys": "x"},
                    {"cellphone": cellphone},
                    {"phone": cellphone},
                ]
            )
        )
    if kind == "invalid":
        return InvalidInput(reason="line 3: cellphone: is too short", row=3)
    return draw(st.sampled_from([None, 5, "+573001234567", [code, cellphone]]))


def facts(planner: Planner, chunks: list[PlannedChunk], given: list[Any]) -> tuple[Any, ...]:
    """All a planner filed; a user given as one is the very object given
    (others, read from a dict, are equal users)."""
    places = {id(item): at for at, item in enumerate(given)}

    def origin(value: Any) -> Any:
        return ("given", places[id(value)]) if id(value) in places else ("read", value)

    return (
        planner.total,
        [
            (c.index, c.wires, c.phones, [*map(origin, c.users)], [*c.positions], c.deferred)
            for c in chunks
        ],
        [(i.position, i.reason, i.row, origin(i.value)) for i in planner.invalid],
        [(d.position, d.phone, origin(d.user)) for d in planner.duplicates],
        [(s.position, s.kind, s.phone, s.reason, s.line, s.item) for s in planner.drain_skipped()],
    )


def defer_some(number: str, user: User) -> str | None:
    return f"no window for {number}" if number.endswith(("3", "7")) else None


def refuse_some(user: User) -> tuple[User | None, str | None]:
    if isinstance(user.cellphone, str) and user.cellphone.endswith("2"):
        return None, "tz: not a time zone"
    return user, None


def one_at_a_time(planner: Planner, given: list[Any]) -> list[PlannedChunk]:
    chunks = [chunk for item in given if (chunk := planner.take(item)) is not None]
    return [*chunks, *filter(None, [planner.flush()])]


def in_batches(planner: Planner, given: list[Any], sizes: list[int]) -> list[PlannedChunk]:
    chunks, at, turn = [], 0, 0
    while at < len(given):
        size = min(sizes[turn % len(sizes)], planner.room)
        chunk = planner.take_many(given[at : at + size])
        if chunk is not None:
            chunks.append(chunk)
        at, turn = at + size, turn + 1
    return [*chunks, *filter(None, [planner.flush()])]


@given(
    given_items=st.tuples(
        st.sampled_from([1, 20, 80, 200]) | st.integers(0, 200), st.sampled_from([1, 6, 60, 600])
    ).flatmap(lambda size: st.lists(items(size[1]), min_size=size[0], max_size=size[0])),
    chunk_size=st.sampled_from([1, 2, 7, 40, 70, 200]) | st.integers(1, 200),
    sizes=st.lists(
        st.sampled_from([1, 16, 17, 70, 200]) | st.integers(1, 200), min_size=1, max_size=5
    ),
    hooks=st.sampled_from(["none", "defer", "prepare and defer"]),
    seen=st.sampled_from(["phone set", "memory ledger"]),
)
@settings(max_examples=300, deadline=None)
def test_a_batch_files_its_items_as_one_at_a_time_does(
    given_items: list[Any], chunk_size: int, sizes: list[int], hooks: str, seen: str
) -> None:
    def planner() -> Planner:
        return Planner(
            chunk_size,
            seen=PhoneSet(bits=2) if seen == "phone set" else RunState(),
            prepare=refuse_some if hooks == "prepare and defer" else None,
            defer=None if hooks == "none" else defer_some,
        )

    singly, batched = planner(), planner()
    expected = facts(singly, one_at_a_time(singly, given_items), given_items)
    assert facts(batched, in_batches(batched, given_items, sizes), given_items) == expected


def test_a_batch_larger_than_the_chunks_room_is_refused() -> None:
    planner = Planner(3)
    planner.take(User(cellphone="3001234567", country_code="+57"))
    with pytest.raises(ValueError, match="3 items for a chunk with room for 2"):
        planner.take_many([None, None, None])
    assert planner.total == 1


phone_texts = (
    st.from_regex(r"\+[0-9]{0,20}", fullmatch=True)
    | st.from_regex(r"\+?[0-9 ]{1,6}", fullmatch=True)
    | st.text(st.sampled_from("+0123456789\u0663a"), max_size=6)
)


@given(phones=st.lists(phone_texts, max_size=40), bits=st.integers(1, 6))
def test_a_phone_set_adds_a_batch_as_it_adds_each_phone(phones: list[str], bits: int) -> None:
    each, batched = PhoneSet(bits), PhoneSet(bits)
    assert batched.add_each(phones) == [*map(each.add, phones)]
    assert len(batched) == len(each)
    assert [*map(batched.add, phones)] == [False] * len(phones)


@given(
    planned=st.lists(st.from_regex(r"\+[0-9]{1,19}", fullmatch=True), max_size=20),
    phones=st.lists(st.from_regex(r"\+[0-9]{1,19}", fullmatch=True) | phone_texts, max_size=20),
)
def test_the_memory_ledgers_index_adds_a_batch_as_it_adds_each_phone(
    planned: list[str], phones: list[str]
) -> None:
    def state() -> RunState:
        run = RunState()
        for phone in planned:  # recipients planned before
            run.index.add(run.key(phone))
        return run

    each, batched = state(), state()
    assert batched.add_each(phones) == [*map(each.add, phones)]
    assert batched.pending == each.pending
    assert batched.long_keys == each.long_keys


@given(
    known=st.lists(st.integers(0, 40), max_size=30),
    keys=st.lists(st.integers(0, 40), max_size=30),
)
def test_the_index_files_new_keys_at_once_as_one_at_a_time(
    known: list[int], keys: list[int]
) -> None:
    def index() -> Index:
        made = Index(bits=1)
        for key in known:
            made.add(key)
        return made

    each, batched = index(), index()
    filed = batched.add_new(keys)
    found = [*map(each.add, keys[:filed])]
    assert found == [0] * filed
    assert filed == len(keys) or each.find(keys[filed])[1]
    assert batched.keys == each.keys
    assert sorted(batched.items()) == sorted(each.items())
    assert batched.found_each(keys) == [each.find(key)[1] for key in keys]
