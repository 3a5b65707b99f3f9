"""What a history says, message by message (histories built as the service
sends them), and the one rule of which answers are one option."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from campaignkit import HistoryEntry, Message, ServerError
from campaignkit.analysis import analyze_poll, normalise_answer
from campaignkit.analysis._analyze import CHART_POINTS, SessionReading, Tally, read_history
from campaignkit.sandbox import Sandbox

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def said(
    sender: str,
    text: str,
    created: int,
    delivered: int | None = None,
    read: int | None = None,
) -> HistoryEntry:
    return HistoryEntry(
        "MESSAGE",
        Message(
            "TEXT",
            sender,
            text,
            at(created),
            delivered_at=None if delivered is None else at(delivered),
            read_at=None if read is None else at(read),
        ),
    )


def test_each_answer_goes_to_the_last_message_before_it_in_time_order() -> None:
    history = [  # as listed: not in time order
        said("USER", "Blue", 40),
        said("AI", "Favourite colour?", 30, delivered=31, read=35),
        said("AI", "Hi! Two questions.", 10, delivered=12),
        said("USER", "hello", 5),
        said("company", "Thanks", 50),  # any sender but the user is the service's side
        said("user", "bye", 60),  # the closed event's lowercase sender
    ]
    reading = read_history(at(0), history)
    assert reading == SessionReading(
        at(0),
        delivered=at(5),  # the user's first message: it was there to answer
        read=at(5),
        replied=at(5),
        answers=((None, "hello"), ("Favourite colour?", "Blue"), ("Thanks", "bye")),
    )


@pytest.mark.parametrize(
    ("history", "steps"),
    [
        ([said("AI", "Q", 1)], (None, None, None)),
        ([said("AI", "Q", 1, delivered=3)], (3, None, None)),
        ([said("AI", "Q", 1, read=4)], (4, 4, None)),  # read without a delivery time
        ([said("AI", "Q", 1, delivered=3, read=4), said("USER", "A", 9)], (3, 4, 9)),
        ([said("USER", "A", 9, delivered=9, read=9)], (9, 9, 9)),  # the user's own times: none
        ([], (None, None, None)),
    ],
)
def test_each_step_from_the_times_the_history_shows(
    history: list[HistoryEntry], steps: tuple[int | None, ...]
) -> None:
    reading = read_history(at(0), history)
    expected = tuple(None if s is None else at(s) for s in steps)
    assert (reading.delivered, reading.read, reading.replied) == expected


def test_no_step_comes_before_the_session_started() -> None:
    reading = read_history(at(10), [said("AI", "Q", 1, delivered=2), said("USER", "A", 3)])
    assert (reading.delivered, reading.read, reading.replied) == (at(10), at(10), at(10))


def tally(readings: Sequence[SessionReading]) -> Tally:
    counted = Tally()
    for reading in readings:
        counted.add(reading)
    return counted


def test_a_session_counts_once_per_question_and_options_are_most_answered_first() -> None:
    chatty = SessionReading(at(0), at(1), at(1), at(1), (("Q", "no"), ("Q", "No!"), ("Q", "NO")))
    brief = SessionReading(at(0), at(1), at(1), at(1), (("Q", "No!"),))
    [question] = tally([chatty, brief]).result("7", None, None).questions
    assert (question.answers, question.sessions) == (4, 2)
    assert [(o.option, o.answers, o.texts) for o in question.options] == [
        ("no", 2, (("NO", 1), ("no", 1))),  # a tie: by option
        ("no!", 2, (("No!", 2),)),
    ]


def test_the_chart_keeps_at_most_its_points_and_ends_at_the_last_move() -> None:
    readings = [SessionReading(at(i), at(i + 1), None, None, ()) for i in range(1000)]
    over_time = tally(readings).result("7", None, None).over_time
    assert len(over_time) == CHART_POINTS
    assert (over_time[0].at, over_time[-1].at) == (at(0), at(1000))
    assert (over_time[0].sessions, over_time[0].delivered) == (1, 0)
    assert (over_time[-1].sessions, over_time[-1].delivered) == (1000, 1000)


async def test_a_history_that_fails_stops_with_its_own_error(sb: Sandbox) -> None:
    await sb.set_faults({"kind": "500", "route": "session_history", "rate": 0.5}, seed=1)
    async with sb.client(max_retries=0) as client:
        with pytest.raises(ServerError) as raised:  # not an ExceptionGroup
            await analyze_poll(client, (await client.list_polls())[0].id, concurrency=4)
    assert raised.value.status == 500


# -- the answer-normalising rule ---------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=40)


@given(texts)
@example("ﬀ İ ǅ ß")
def test_normalising_twice_changes_nothing(text: str) -> None:
    once = normalise_answer(text)
    assert normalise_answer(once) == once


@given(st.lists(st.text(st.characters(codec="utf-8", exclude_categories=["Z", "C"]), min_size=1)))
def test_spacing_does_not_count(words: list[str]) -> None:
    assert normalise_answer(" \t".join(words) + "\n") == normalise_answer(" ".join(words))
    assert "  " not in normalise_answer(" \u00a0 ".join(words))


@given(st.text(st.characters(codec="ascii"), max_size=40))
def test_case_does_not_count(text: str) -> None:
    assert normalise_answer(text.upper()) == normalise_answer(text.lower())


@given(texts)
@example("\u01f0")  # ǰ: case-folded, it decomposes
def test_the_option_is_trimmed_folded_and_composed(text: str) -> None:
    option = normalise_answer(text)
    assert option == option.strip()
    assert unicodedata.normalize("NFKC", option) == option
    # Folded, up to composition: no text is both for a few letters such as this ǰ.
    assert unicodedata.normalize("NFKC", option.casefold()) == option


def test_one_option_however_it_is_written() -> None:
    spellings = [
        "Sí",
        "  SÍ\n",
        "Si\u0301",
        "\uff33\uff29\u0301",
    ]  # composed, decomposed, full width
    assert {normalise_answer(s) for s in spellings} == {"sí"}
