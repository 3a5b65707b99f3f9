"""The boundaries and words of input validation that the main-path tests do
not reach: each number's lengths as its country allows them, the longest
digits a number may have, and the messages users read."""

from __future__ import annotations

from datetime import datetime, timedelta, tzinfo

import pytest

from campaignkit import User
from campaignkit._input.validation import (
    Problems,
    encoded_segment,
    given,
    ledger_phone,
    page_limit,
    unix_seconds,
    user_wire,
    users_tuple,
)
from campaignkit._words import article, counted, listed
from campaignkit.bulk import InvalidInput


def problems_of(user: User) -> Problems:
    problems: Problems = []
    user_wire(user, "users[0]", problems)
    return problems


# Colombia's numbers have 8, 10 or 11 digits: each bound, on both sides.
@pytest.mark.parametrize(
    ("digits", "accepted"), [(7, False), (8, True), (9, False), (11, True), (12, False)]
)
def test_a_cellphone_has_a_length_its_country_allows(digits: int, accepted: bool) -> None:
    problems = problems_of(User(country_code="+57", cellphone="6" * digits))
    if accepted:
        assert problems == []
    else:
        [(path, message)] = problems
        assert path == "users[0].cellphone"
        assert f"{digits} digits, where numbers of +57 have 8, 10, 11" in message


def test_more_digits_than_any_number_has_are_refused_by_their_form() -> None:
    [(path, message)] = problems_of(User(country_code="+49", cellphone="1" * 18))
    assert path == "users[0].cellphone"
    assert message == "must be digits (spaces, dashes and parentheses are allowed)"
    problems: Problems = []
    assert ledger_phone("+49" + "1" * 18, "phone", problems) is None
    assert problems == [("phone", "must be digits (spaces, dashes and parentheses are allowed)")]


def test_a_whole_number_without_a_country_is_refused_in_words() -> None:
    problems: Problems = []
    assert ledger_phone("+999 3001234567", "phones[0]", problems) is None
    assert problems == [("phones[0]", "starts with no country code")]


class NoOffset(tzinfo):
    """A zone that knows no offset: a time in it is as naive as one without."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (datetime(2030, 1, 1), "datetime must be timezone-aware"),
        (datetime(2030, 1, 1, tzinfo=NoOffset()), "datetime must be timezone-aware"),
        (-1, "must be UNIX seconds (an int from 0 to 2**63 - 1) or an aware datetime, "),
        (2**63, "but an int (9223372036854775808) was given"),
    ],
)
def test_a_bad_eta_says_why(value: object, message: str) -> None:
    problems: Problems = []
    unix_seconds(value, "users[0].deployment_eta", problems)
    [(path, said)] = problems
    assert path == "users[0].deployment_eta"
    assert message in said


def test_the_words_for_empty_users_segments_and_limits() -> None:
    problems: Problems = []
    users_tuple([], problems)
    encoded_segment("session_id", "a\x07b", problems)
    encoded_segment("session_id", "a\ud800", problems)
    page_limit("limit", 0, problems)
    assert problems == [
        ("users", "at least one user is required"),
        ("session_id", "must not contain control characters"),
        ("session_id", "must be UTF-8 encodable (no lone surrogates)"),
        ("limit", "must be an int from 1 to 10000, but an int (0) was given"),
    ]


@pytest.mark.parametrize(
    ("word", "said"),
    [
        ("InvalidInput", "an InvalidInput"),  # it said "a InvalidInput"
        ("int", "an int"),
        ("object", "an object"),
        ("Exception", "an Exception"),
        ("str", "a str"),
        ("User", "a User"),
        ("UUID", "a UUID"),
        ("Union", "a Union"),
        ("UnknownThing", "an UnknownThing"),
        ("HTTPError", "an HTTPError"),
        ("Decimal", "a Decimal"),
    ],
)
def test_a_type_s_name_takes_the_article_it_is_read_with(word: str, said: str) -> None:
    assert f"{article(word)} {word}" == said


def test_what_was_given_is_said_with_its_article() -> None:
    assert given(InvalidInput(reason="bad", row=3), shown=False) == "an InvalidInput"
    assert given(7) == "an int (7)"


@pytest.mark.parametrize(
    ("count", "noun", "said"),
    [
        (0, "user", "0 users"),
        (1, "user", "1 user"),  # it said "1 users"
        (2, "user", "2 users"),
        (1, "launch", "1 launch"),
        (3, "launch", "3 launches"),
        (1, "row", "1 row"),
        (2, "box", "2 boxes"),
        (2, "person", "2 people"),
    ],
)
def test_a_count_takes_its_noun_in_the_right_number(count: int, noun: str, said: str) -> None:
    plural = "people" if noun == "person" else None
    assert counted(count, noun, plural) == said


def test_names_are_listed_under_their_noun_in_its_number() -> None:
    """Say "unknown field: email", never "field(s)"."""
    assert listed("field", ["email"]) == "field: email"
    assert listed("field", ["email", "phone"]) == "fields: email, phone"
    assert listed("batch", ["a", "b"]) == "batches: a, b"
    assert listed("person", ["a", "b"], "people") == "people: a, b"
    assert counted(2, "late key") == "2 late keys"
    assert counted(1, "late key") == "1 late key"
