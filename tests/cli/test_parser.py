"""Every command takes its options as its usage line shows them, and among its
positionals as a user types them (``suppress add --journal J +573001234567``,
the order of the README, was refused with ``unrecognized arguments``)."""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit.cli.parser import build_parser, parse

# One of these fits each option's type (a number, a time, KEY=VALUE, a phone,
# a failure status, a duration, a breaker, a share).
CANDIDATES = (
    "2",
    "0.5",
    "24h",
    "0.2/500",
    "2026-11-28T10:00:00+00:00",
    "k=v",
    "+573001234567",
    "FAILURE_BY_UNABLE_TO_CONTACT",
    "x",
)


def commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def converted(action: argparse.Action, text: str) -> Any:
    return action.type(text) if callable(action.type) else text


def value_for(action: argparse.Action) -> str:
    if action.choices:
        return str(next(iter(action.choices)))
    for text in CANDIDATES:
        try:
            converted(action, text)
        except (argparse.ArgumentTypeError, TypeError, ValueError):
            continue
        return text
    raise AssertionError(f"no sample value for {action.dest}")


def group(action: argparse.Action) -> tuple[list[str], Any]:
    """The tokens that give ``action`` a value, and the value parsed."""
    if action.nargs == 0:
        return [action.option_strings[0]], action.const
    text = value_for(action)
    value = converted(action, text)
    many = action.nargs in ("*", "+")
    values = [text, text] if many else [text]
    expected = [value, value] if many else [value]
    if isinstance(action, argparse._ExtendAction):
        return [action.option_strings[0], text], list(value)
    if isinstance(action, argparse._AppendAction):
        return [action.option_strings[0], text], [value]
    return [*action.option_strings[:1], *values], expected if many else value


def in_usage_order(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's actions where its usage line shows them (each one must)."""
    usage = parser.format_usage()
    placed = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            shown = re.escape(action.option_strings[0])
        elif action.choices:
            shown = re.escape("{" + ",".join(map(str, action.choices)) + "}")
        else:
            shown = re.escape(str(action.metavar or action.dest))
        where = [m.start() for m in re.finditer(rf"(?<![\w-]){shown}(?![\w-])", usage)]
        assert where, f"{parser.prog}: {action.dest} is not on the usage line"
        # Positionals follow every option: the last mention is theirs.
        placed.append((where[0] if action.option_strings else where[-1], action))
    return [action for _, action in sorted(placed, key=lambda pair: pair[0])]


def check(name: str, layout: list[tuple[argparse.Action, list[str], Any]]) -> None:
    argv = [name, *(token for _, tokens, _ in layout for token in tokens)]
    args = parse(argv)
    for action, _, expected in layout:
        assert getattr(args, action.dest) == expected, (argv, action.dest)


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_takes_its_options_in_the_order_of_its_usage_line(name: str) -> None:
    layout = [(action, *group(action)) for action in in_usage_order(commands()[name])]
    check(name, layout)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(commands())), data=st.data())
def test_options_may_stand_anywhere_among_the_positionals(name: str, data: st.DataObject) -> None:
    layout = [(action, *group(action)) for action in in_usage_order(commands()[name])]
    shuffled = data.draw(st.permutations(layout))
    positionals = iter(item for item in layout if not item[0].option_strings)
    # Positionals keep their own order: only the options move among them.
    check(name, [item if item[0].option_strings else next(positionals) for item in shuffled])


def test_suppress_add_as_the_readme_shows_it() -> None:
    args = parse(["suppress", "add", "--journal", "J", "+573001234567", "+573001234568"])
    assert (args.action, args.journal) == ("add", "J")
    assert args.items == ["+573001234567", "+573001234568"]
