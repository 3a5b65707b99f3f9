"""The sending-line options of a bulk send: checked before anything is sent,
and kept with the run as plain JSON."""

from __future__ import annotations

import string
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit import SendWindow
from campaignkit.bulk import SendRules, rules_problems

pytestmark = pytest.mark.timeout(60)

anything = st.none() | st.integers() | st.booleans() | st.text(max_size=8) | st.floats()
numbers = st.text(string.digits + "+ -", min_size=0, max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    st.none() | st.integers(-5, 10**6) | anything,
    st.none() | st.lists(numbers, max_size=4) | anything,
)
def test_options_give_rules_or_problems_naming_them(daily_limit: Any, lines: Any) -> None:
    rules, problems = rules_problems(None, daily_limit, lines, None)
    named = {path.split("[")[0] for path, _ in problems}
    assert named <= {"daily_limit", "lines"}
    if not problems:
        assert rules.daily_limit == daily_limit
        assert all(line.isdigit() and not line.startswith("0") for line in rules.lines)
        assert len(set(rules.lines)) == len(rules.lines)
    if isinstance(lines, list) and any(not line.isdigit() for line in lines):
        assert any(path.startswith("lines[") for path, _ in problems)


def test_rules_round_trip_through_json() -> None:
    rules = SendRules(
        SendWindow("08:30", "19:00", days=[0, 2]), 250, ("573001112222",), "America/Bogota"
    )
    stored = orjson.loads(orjson.dumps(rules.options()))
    assert SendRules.from_options(stored) == rules
    # Options stored before default_tz existed: none.
    del stored["default_tz"]
    assert SendRules.from_options(stored).default_tz is None
    assert SendRules.from_options({}) == SendRules()
    assert not SendRules(daily_limit=5).rewrites


def test_each_bad_option_is_named() -> None:
    _, problems = rules_problems("09-20", True, "573001112222", "Europe/Madrid")
    assert [path for path, _ in problems] == ["send_window", "daily_limit", "lines", "tz_for"]
    _, problems = rules_problems(None, None, ["573001112222", "573001112222", "57300"], None)
    assert [path for path, _ in problems] == ["lines[2]", "lines"]


def test_default_tz_names_a_zone_and_times_a_window() -> None:
    window = SendWindow("09:00", "20:00")
    rules, problems = rules_problems(window, None, None, None, "Europe/Madrid")
    assert (rules.default_tz, problems) == ("Europe/Madrid", [])
    for bad in ("Mars/Olympus", "", 3):
        _, problems = rules_problems(window, None, None, None, bad)
        assert [path for path, _ in problems] == ["default_tz"]
    _, problems = rules_problems(None, None, None, None, "Europe/Madrid")
    assert problems == [("default_tz", "times a send window: give send_window too")]
    # A bad window is named once, not blamed on default_tz.
    _, problems = rules_problems("09-20", None, None, None, "Europe/Madrid")
    assert [path for path, _ in problems] == ["send_window"]
