"""Users files of ``send``: CSV (as :func:`campaignkit.users_from_csv` reads
it), a JSON array or ``{"users": [...]}``, JSON Lines, or stdin (``-``).

Every user goes through the SDK's one coercion (``as_user``), the one
``send_bulk`` applies to dicts: a user, its session keys and its
``deployment_eta`` read the same from CSV, JSON and Python.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from .. import errors
from .._input.csv_files import checked_user
from .._input.users import as_user
from ..bulk import InvalidInput, users_from_csv
from ..models import User
from .context import UsageError
from .output import one_line


def add_users_arguments(p: argparse.ArgumentParser) -> None:
    """The poll and users file arguments of the commands that send to a file's users."""
    p.add_argument("poll_id")
    p.add_argument("file", help="users file (.csv / .json / .jsonl, or '-')")
    p.add_argument("--format", choices=["csv", "json"], help="default: from the file name")


def readable(path: str) -> str:
    """The display name of an input path; a UsageError if it is not a file."""
    if path == "-":
        return "<stdin>"
    if not os.path.isfile(path):
        raise UsageError(f"cannot read {path}: no such file")
    return path


def is_csv(path: str, fmt: str | None) -> bool:
    if fmt is not None:
        return fmt == "csv"
    return Path(path).suffix.lower() not in (".json", ".jsonl")


def load_users(path: str, fmt: str | None) -> list[User]:
    """Every user of the file, for one request; a UsageError naming the first
    items that are not users, CSV rows and JSON Lines by their line (for a
    JSON array, the request's validation checks the rest, by index)."""
    name = readable(path)
    with _reading(name):
        if is_csv(path, fmt):
            items = list(users_from_csv(_source(path)))
        else:
            items = _json_users(*_json_items(path, name))
    bad = [item.reason for item in items if isinstance(item, InvalidInput)]
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise UsageError(f"{name}: {'; '.join(bad[:3])}{more}")
    return [item for item in items if isinstance(item, User)]


def bulk_input(path: str, fmt: str | None) -> tuple[Iterable[Any], int | None]:
    """The file's items for ``send_bulk``, which validates and reports each
    one (CSV rows and JSON Lines by line, CSV streamed), and their number if
    cheaply known."""
    name = readable(path)
    if is_csv(path, fmt):
        return users_from_csv(_source(path)), _count_rows(path)
    with _reading(name):
        items, lines = _json_items(path, name)
    # JSON Lines checked here, to be named by line; an array's items by send_bulk.
    return (items if lines is None else _json_users(items, lines)), len(items)


def _json_users(items: list[Any], lines: list[int] | None) -> list[User | InvalidInput]:
    """The users of a JSON file, each not one named by its line (JSON Lines,
    checked as a CSV row is) or its index in the array."""
    users: list[User | InvalidInput] = []
    for i, item in enumerate(items):
        line = None if lines is None else lines[i]
        user, reason = as_user(item)
        if user is None:
            place = f"users[{i}]" if line is None else f"line {line}"
            users.append(InvalidInput(reason=f"{place}: {reason}", row=line))
        else:
            users.append(user if line is None else checked_user(user, line))
    return users


def _source(path: str) -> str:
    return "/dev/stdin" if path == "-" else path


@contextlib.contextmanager
def _reading(name: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{name} is not UTF-8 text") from None
    except errors.ValidationError as exc:  # a CSV header without the needed columns
        raise UsageError(f"{name}: {one_line(exc)}") from None


def _json_items(path: str, name: str) -> tuple[list[Any], list[int] | None]:
    """The file's items, and their lines for JSON Lines (None for an array)."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text("utf-8-sig")
    lines = None
    try:
        data: Any = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        numbered = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        try:  # JSON Lines
            data = [orjson.loads(line) for _, line in numbered]
        except orjson.JSONDecodeError:
            raise UsageError(f"{name}: not valid JSON ({exc})") from None
        lines = [n for n, _ in numbered]
    if isinstance(data, dict):
        # {"users": [...]}, else one user (a JSON Lines file of one line).
        if isinstance(data.get("users"), list):
            return data["users"], None
        return [data], [text[: len(text) - len(text.lstrip())].count("\n") + 1]
    if not isinstance(data, list):
        raise UsageError(f'{name}: expected a JSON array of users or {{"users": [...]}}')
    return data, lines


def _count_rows(path: str) -> int | None:
    """The data rows of a CSV file (for a progress bar), None for stdin."""
    if path == "-":
        return None
    try:
        with open(path, "rb") as f:
            first = f.readline()
            lines = sum(1 for line in f if line.strip())
    except OSError:
        return None
    # Excel's "sep=;" line comes before the header.
    return max(lines - 1, 0) if first.lstrip(b"\xef\xbb\xbf").lower().startswith(b"sep=") else lines
