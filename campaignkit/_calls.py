"""The service's eight calls, each a few lines over one helper that
validates, builds the request and sends it with the endpoint's retry rules."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from ._input.validation import (
    Problems,
    is_text,
    page_limit,
    path_segment,
    raise_problems,
    session_keys_wire,
    unix_seconds,
    users_tuple,
)
from ._io.transport import Transport
from ._wire import sansio as wire
from ._wire.decode import users_wire
from .config import ClientConfig, SessionQueryNames
from .errors import ResponseError
from .models import (
    Agent,
    CampaignAck,
    CampaignStatus,
    HistoryEntry,
    LegacyDeployment,
    Poll,
    SessionKey,
    SessionMeta,
    SessionPage,
    SessionUpdate,
    User,
)

T = TypeVar("T")
Timestamp = int | datetime
SessionKeys = Iterable[SessionKey] | Mapping[str, str]

_SESSION_PAGE = wire.decoder(SessionPage)


def _session_page(body: bytes, status: int, headers: Mapping[str, str]) -> SessionPage:
    page = _SESSION_PAGE(body, status, headers)
    # The last page's cursor comes as "" (or absent): None is the one "no more".
    return page if page.next_id else SessionPage(page.results, None)


_ACK = wire.decoder(CampaignAck)
_LEGACY = wire.decoder(LegacyDeployment)


def _users_body(users: Iterable[User]) -> dict[str, Any]:
    """A campaign body's ``_call`` arguments: its JSON, users and problems."""
    problems: Problems = []
    given = users_tuple(users, problems)
    return {
        "body_problems": problems,
        "json": {"users": users_wire(given, problems)},
        "users": given,
    }


class ServiceCalls:
    """The calls of :class:`~campaignkit.CampaignClient`."""

    config: ClientConfig
    transport: Transport

    async def _call(
        self,
        endpoint: wire.Endpoint,
        decode: wire.Decode[T],
        timeout: float | None,
        max_retries: int | None,
        *,
        body_problems: Sequence[tuple[str, str]] = (),
        query: Mapping[str, str | int] | None = None,
        json: Any = None,
        users: tuple[User, ...] = (),
        **path: object,
    ) -> T:
        """Validate the path parameters (reported before the body's problems),
        build the request and send it with the endpoint's retry rules."""
        problems: Problems = []
        segments = {name: path_segment(name, value, problems) for name, value in path.items()}
        if problems or body_problems:
            raise_problems([*problems, *body_problems])
        request = wire.build_request(
            self.config, endpoint, path_params=segments, query=query, json=json, users=users
        )
        return await self.transport.call(request, decode, timeout=timeout, max_retries=max_retries)

    # -- sends (never resent after an ambiguous failure) ----------------------

    async def send_campaign(
        self,
        poll_id: str | int,
        users: Iterable[User],
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> CampaignAck:
        """Queue a campaign of ``poll_id`` to ``users``; answered before anyone
        is messaged. Track it with :meth:`track`."""
        body = _users_body(users)
        return await self._call(
            wire.SEND_CAMPAIGN, _ACK, timeout, max_retries, **body, poll_id=poll_id
        )

    async def deploy_legacy(
        self,
        poll_id: str | int,
        users: Iterable[User],
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> LegacyDeployment:
        """Deploy through the legacy endpoint, retired on 15 November 2026.

        .. deprecated:: use :meth:`send_campaign`.
        """
        warnings.warn(
            "deploy_legacy uses the legacy deploy endpoint, shut down on 15 November 2026: "
            "use send_campaign",
            DeprecationWarning,
            stacklevel=2,
        )
        body = _users_body(users)
        return await self._call(
            wire.DEPLOY_LEGACY, _LEGACY, timeout, max_retries, **body, poll_id=poll_id
        )

    async def update_session(
        self,
        session_external_id: str,
        user_session_keys: SessionKeys,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> SessionUpdate:
        """Merge ``user_session_keys`` into the session the first-reply webhook
        named, and continue its conversation."""
        problems: Problems = []
        keys = session_keys_wire(user_session_keys, "user_session_keys", problems)
        return await self._call(
            wire.UPDATE_SESSION,
            wire.decoder(SessionUpdate),
            timeout,
            max_retries,
            body_problems=problems,
            json={"user_session_keys": keys},
            session_external_id=session_external_id,
        )

    async def get_campaign_status(
        self,
        launch_request_id: str,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> CampaignStatus:
        """The campaign request's state and every deployment's status."""
        return await self._call(
            wire.CAMPAIGN_STATUS,
            wire.decoder(CampaignStatus),
            timeout,
            max_retries,
            launch_request_id=launch_request_id,
        )

    async def list_sessions(
        self,
        poll_id: str | int,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> SessionPage:
        """One page of session metadata of ``poll_id``. Without arguments the
        service answers the first 1000 sessions of the current year."""
        problems: Problems = []
        query = sessions_query(self.config.session_query, start, end, limit, cursor, problems)
        return await self._call(
            wire.LIST_SESSIONS,
            _session_page,
            timeout,
            max_retries,
            body_problems=problems,
            query=query,
            poll_id=poll_id,
        )

    async def iter_sessions(
        self,
        poll_id: str | int,
        *,
        start: Timestamp | None = None,
        end: Timestamp | None = None,
        page_size: int | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> AsyncIterator[SessionMeta]:
        """Every session of ``poll_id``, following ``next_id`` page by page.

        A cursor the service already gave ends the iteration with a
        :class:`ResponseError` rather than a loop.
        """
        problems: Problems = []
        path_segment("poll_id", poll_id, problems)
        sessions_query(
            self.config.session_query, start, end, page_size, None, problems, limit_name="page_size"
        )
        raise_problems(problems)
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            page = await self.list_sessions(
                poll_id,
                start=start,
                end=end,
                limit=page_size,
                cursor=cursor,
                timeout=timeout,
                max_retries=max_retries,
            )
            for session in page.results:
                yield session
            cursor = page.next_id
            if cursor is None:
                return
            if cursor in seen:
                raise ResponseError(f"the session listing repeated cursor {cursor!r}")
            seen.add(cursor)

    async def get_session_history(
        self,
        session_id: str,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> list[HistoryEntry]:
        """The complete message history of one session."""
        return await self._call(
            wire.SESSION_HISTORY,
            wire.decoder(list[HistoryEntry]),
            timeout,
            max_retries,
            session_id=session_id,
        )

    async def list_polls(
        self, *, timeout: float | None = None, max_retries: int | None = None
    ) -> list[Poll]:
        """Every poll (conversation) of the company."""
        return await self._call(wire.LIST_POLLS, wire.decoder(list[Poll]), timeout, max_retries)

    async def list_agents(
        self, *, timeout: float | None = None, max_retries: int | None = None
    ) -> list[Agent]:
        """The company's active agents (each can receive a conversation)."""
        return await self._call(wire.LIST_AGENTS, wire.decoder(list[Agent]), timeout, max_retries)


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
