"""What the calls send and read beyond a model: a campaign's users body, the
session listing's query and its last page's cursor."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ._input.validation import (
    Problems,
    is_text,
    page_limit,
    unix_seconds,
    users_tuple,
)
from ._wire import sansio as wire
from ._wire.body import users_wire
from .config import SessionQueryNames
from .models import SessionPage, User

Timestamp = int | datetime

_SESSION_PAGE = wire.decoder(SessionPage)


def session_page(body: bytes, status: int, headers: Mapping[str, str]) -> SessionPage:
    page = _SESSION_PAGE(body, status, headers)
    # The last page's cursor comes as "" (or absent): None is the one "no more".
    return page if page.next_id else SessionPage(page.results, None)


def users_body(users: Iterable[User]) -> dict[str, Any]:
    """A campaign body's ``_call`` arguments: its JSON, users and problems."""
    problems: Problems = []
    given = users_tuple(users, problems)
    return {
        "body_problems": problems,
        "json": {"users": users_wire(given, problems)},
        "users": given,
    }


def sessions_query(
    names: SessionQueryNames,
    start: Timestamp | None,
    end: Timestamp | None,
    limit: int | None,
    cursor: str | None,
    problems: Problems,
    *,
    limit_name: str = "limit",
) -> dict[str, str | int]:
    """The session listing's query (named as ``names`` says), its problems added."""
    query: dict[str, str | int] = {}
    valid: dict[str, int] = {}
    for name, value in (("start", start), ("end", end)):
        if value is not None:
            before = len(problems)
            query[getattr(names, name)] = seconds = unix_seconds(value, name, problems)
            if len(problems) == before:
                valid[name] = seconds
    if len(valid) == 2 and valid["end"] < valid["start"]:
        problems.append(("end", "must not be before start"))
    if limit is not None:
        page_limit(limit_name, limit, problems)
        query[names.limit] = limit
    if cursor is not None:
        if not is_text(cursor) or not cursor:
            problems.append(("cursor", "must be a non-empty string"))
        query[names.cursor] = cursor
    return query
