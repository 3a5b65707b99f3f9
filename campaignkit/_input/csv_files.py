"""Users read from a CSV file, streamed; unreadable rows are yielded as
:class:`InvalidInput` for ``send_bulk`` to report, never raised. And the one
rule that keeps a cell written for a spreadsheet inert there (a run's
export), undone when the file is read back."""

from __future__ import annotations

import asyncio
import csv
import itertools
import os
import re
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Final

import attrs

from .._words import listed
from ..models import SessionKey, User
from .users import RUN_FACTS, RUN_FIELD, InvalidInput, build_user
from .validation import Problems, raise_problems, user_wire

RUN_COLUMNS: Final = tuple(f"{RUN_FIELD}.{fact}" for fact in RUN_FACTS)
"""The columns a run's export adds after each user's (``run.state``...):
what became of that recipient. Read back, they are not session variables."""

# A cell starting with one of these runs as a formula in Excel, LibreOffice
# and Google Sheets (OWASP, "CSV Injection"): a leading "'" makes it text.
FORMULA_STARTS: Final = "=+-@\t\r"
_FORMULA_START = f"[{re.escape(FORMULA_STARTS)}]"
# Quotes before a formula start are the writer's doing or the value's own: a
# value so written gains one more quote, so that the reader takes one off.
_NEUTRALISABLE = re.compile(f"'*{_FORMULA_START}")
_NEUTRALISED = re.compile(f"'+{_FORMULA_START}")


def spreadsheet_cell(value: str) -> str:
    """``value`` as a CSV cell no spreadsheet runs as a formula (``'+57``,
    ``'=HYPERLINK(...)``); :func:`as_written` gives it back exactly. A
    value already quoted that way gains one more quote, so that it does."""
    return "'" + value if _NEUTRALISABLE.match(value) else value


def as_written(cell: str) -> str:
    """A cell as it was before :func:`spreadsheet_cell` (the same cell if it
    did not change it)."""
    return cell[1:] if cell[:1] == "'" and _NEUTRALISED.match(cell) else cell


@attrs.frozen
class _CsvLayout:
    header: tuple[str, ...]
    country_code: int
    cellphone: int
    eta: int | None
    keys: tuple[tuple[int, str], ...]


DELIMITERS = ",;\t|"
"""What :func:`sniff_delimiter` chooses from: a comma, the semicolon Excel
writes where the comma is the decimal mark (es, pt, fr, de...), tab, pipe."""


def sniff_delimiter(header: str) -> str:
    """The delimiter of a CSV header line: the candidate that splits out both
    required columns, else the most frequent one (a comma when none is
    there: a one-column header)."""
    names = {"country_code", "cellphone"}
    for candidate in DELIMITERS:
        if names <= {name.strip().strip('"').strip() for name in header.split(candidate)}:
            return candidate
    return max(DELIMITERS, key=lambda candidate: (header.count(candidate), candidate == ","))


def _excel_separator(line: str) -> str | None:
    """The delimiter named by Excel's ``sep=;`` first line, if ``line`` is one."""
    text = line.rstrip("\r\n")
    if len(text) == 5 and text.lower().startswith("sep="):
        return text[4]
    return None


def _csv_layout(header: list[str], eta_column: str, delimiter: str) -> _CsvLayout:
    names = [as_written(name.strip()) for name in header]
    problems: Problems = []
    missing = [repr(name) for name in ("country_code", "cellphone") if name not in names]
    if missing:
        found = ", ".join(repr(name) for name in names[:6])
        problems.append(
            (
                "header",
                f"needs a {' and a '.join(missing)} column (read the columns {found} "
                f"split on {delimiter!r})",
            )
        )
    if any(not name for name in names):
        problems.append(("header", "has an empty column name"))
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        problems.append(("header", f"repeats {listed('column', repeated)}"))
    raise_problems(problems)
    fixed = {"country_code", "cellphone", eta_column, *RUN_COLUMNS}
    return _CsvLayout(
        tuple(names),
        names.index("country_code"),
        names.index("cellphone"),
        names.index(eta_column) if eta_column in names else None,
        tuple((i, name) for i, name in enumerate(names) if name not in fixed),
    )


def _csv_item(row: list[str], line: int, layout: _CsvLayout, validate: bool) -> User | InvalidInput:
    if len(row) != len(layout.header):
        return InvalidInput(
            reason=f"line {line}: expected {len(layout.header)} fields, got {len(row)}", row=line
        )
    country_code = as_written(row[layout.country_code]).strip()
    if country_code.isascii() and country_code.isdigit():
        # The service's own upload template writes ``57``, without its "+".
        country_code = "+" + country_code
    user, reason = build_user(
        as_written(row[layout.cellphone]).strip(),
        country_code,
        tuple(SessionKey(name, as_written(row[i])) for i, name in layout.keys),
        None if layout.eta is None else as_written(row[layout.eta]),
    )
    if user is None:
        return InvalidInput(reason=f"line {line}: {reason}", row=line)
    return checked_user(user, line) if validate else user


def checked_user(user: User, line: int) -> User | InvalidInput:
    """``user`` if it passes the send's validation, else an
    :class:`InvalidInput` naming its file ``line`` and every problem."""
    problems: Problems = []
    if user_wire(user, "", problems) is None:
        text = "; ".join(f"{path.lstrip('.')}: {message}" for path, message in problems)
        return InvalidInput(reason=f"line {line}: {text}", row=line)
    return user


def users_from_csv(
    path: str | os.PathLike[str],
    *,
    encoding: str = "utf-8-sig",
    delimiter: str | None = None,
    eta_column: str = "deployment_eta",
    validate: bool = True,
) -> Iterator[User | InvalidInput]:
    """Stream users from a CSV file with a header row.

    Columns: ``country_code``, ``cellphone``, optionally ``deployment_eta``
    (UNIX seconds or an ISO 8601 date-time with its offset; empty for none), and
    every other column is a session variable named by its header (its value
    kept as written, empty included), but the ``run.*`` columns a run's
    export adds (``run.state``, ``run.status``...: :data:`RUN_COLUMNS`). A
    ``tz`` column names each user's time zone for a send window
    (``send_window=``); an empty cell means the zone of the number. Blank
    lines are skipped.

    Files as spreadsheets write them are read as they are: a UTF-8 BOM is
    skipped (the default ``utf-8-sig``), Excel's ``sep=;`` first line names
    the delimiter, and without it (``delimiter=None``, the default) the
    delimiter is found from the header: comma, semicolon (Excel in Spanish,
    Portuguese, French or German), tab or pipe. A cell a run's export made
    safe for a spreadsheet (a ``'`` before a leading ``=``, ``+``, ``-``,
    ``@``, tab or carriage return, e.g. ``'+57``) is read as it was before.

    A row that cannot be read (wrong field count, bad date) or, with
    ``validate`` (the default), fails validation, is yielded as an
    :class:`InvalidInput` naming its line; ``send_bulk`` reports it as
    invalid. A header without ``country_code``/``cellphone`` raises
    :class:`ValidationError`.
    """
    return _csv_rows(path, encoding, delimiter, eta_column, validate)


def _csv_rows(
    path: str | os.PathLike[str],
    encoding: str,
    delimiter: str | None,
    eta_column: str,
    validate: bool,
) -> Generator[User | InvalidInput, None, None]:
    with open(path, newline="", encoding=encoding) as file:
        first = file.readline()
        skipped = 0  # lines before the header, for the line numbers
        named = _excel_separator(first)
        if named is not None:
            skipped, first = 1, file.readline()
        delimiter = delimiter or named or sniff_delimiter(first)
        reader = csv.reader(itertools.chain([first], file), delimiter=delimiter)
        header = next(reader, None)
        if header is None:
            return
        layout = _csv_layout(header, eta_column, delimiter)
        while True:
            # next() by hand: a csv.Error is one bad row, reported, not the end.
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                line = reader.line_num + skipped
                yield InvalidInput(reason=f"line {line}: {exc}", row=line)
                continue
            if row:
                yield _csv_item(row, reader.line_num + skipped, layout, validate)


async def ausers_from_csv(
    path: str | os.PathLike[str],
    *,
    encoding: str = "utf-8-sig",
    delimiter: str | None = None,
    eta_column: str = "deployment_eta",
    validate: bool = True,
    batch: int = 1000,
) -> AsyncIterator[User | InvalidInput]:
    """:func:`users_from_csv` reading in a worker thread, ``batch`` rows at a
    time, so the event loop never waits on the disk."""
    rows = _csv_rows(path, encoding, delimiter, eta_column, validate)
    try:
        while True:
            items = await asyncio.to_thread(lambda: list(itertools.islice(rows, batch)))
            for item in items:
                yield item
            if len(items) < batch:
                return
    finally:
        await asyncio.to_thread(rows.close)
