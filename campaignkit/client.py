"""``CampaignClient``: the eight calls of the service, awaitable."""

from __future__ import annotations

import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import aiohttp
import attrs

from . import _sansio as wire
from . import bulk as _bulk
from ._aiohttp import AiohttpExchange
from ._closing import AsyncClosing
from ._exchange import Exchange
from ._transport import Sleep, Transport
from ._validation import (
    Problems,
    is_text,
    page_limit,
    path_segment,
    raise_problems,
    session_keys_wire,
    unix_seconds,
    users_tuple,
    users_wire,
)
from .config import ClientConfig, RetryPolicy, SessionQueryNames
from .errors import ConfigurationError, ResponseError
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
from .tracker import CampaignTracker, OnState, Target, TrackerGroup, TrackOptions

__all__ = ["CampaignClient"]

T = TypeVar("T")
Timestamp = int | datetime
SessionKeys = Iterable[SessionKey] | Mapping[str, str]

_SESSION_PAGE = wire.decoder(SessionPage)


def _session_page(body: bytes, status: int, headers: Mapping[str, str]) -> SessionPage:
    page = _SESSION_PAGE(body, status, headers)
    # The last page's cursor comes as "" (or absent): None is the one "no more".
    return page if page.next_id else SessionPage(page.results, None)


class CampaignClient(AsyncClosing):
    """An async client of the Conversation Campaign and Session Service.

    Settings not given come from ``CAMPAIGNKIT_API_KEY``,
    ``CAMPAIGNKIT_BASE_URL``, ``CAMPAIGNKIT_CAMPAIGN_URL`` and
    ``CAMPAIGNKIT_AGENT_URL``; the others are those of :class:`ClientConfig`.
    Use it as an async context manager (or call :meth:`aclose`). ``timeout``
    (seconds per request) and ``max_retries`` (retries after the first
    attempt) may also be given per call. Pass either a whole ``config=`` or
    settings, not both.

    The I/O goes through ``exchange`` (default: an aiohttp session, or the
    injected ``session``, which is left for its owner to close): tests may
    script it (see :class:`campaignkit.Exchange`).
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        campaign_url: str | None = None,
        agent_url: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        connect_timeout: float | None = None,
        retry: RetryPolicy | None = None,
        auth_header: str | None = None,
        auth_scheme: str | None = None,
        authorize_session_update: bool | None = None,
        session_query: SessionQueryNames | None = None,
        max_response_bytes: int | None = None,
        max_connections: int | None = None,
        config: ClientConfig | None = None,
        session: aiohttp.ClientSession | None = None,
        exchange: Exchange | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        settings: dict[str, Any] = {
            name: value
            for name, value in (
                ("api_key", api_key),
                ("base_url", base_url),
                ("campaign_url", campaign_url),
                ("agent_url", agent_url),
                ("timeout", timeout),
                ("connect_timeout", connect_timeout),
                ("retry", retry),
                ("auth_header", auth_header),
                ("auth_scheme", auth_scheme),
                ("authorize_session_update", authorize_session_update),
                ("session_query", session_query),
                ("max_response_bytes", max_response_bytes),
                ("max_connections", max_connections),
            )
            if value is not None
        }
        if config is not None:
            given = [*settings, *(["max_retries"] if max_retries is not None else [])]
            if given:
                # A setting beside a whole config would be silently ignored.
                raise ConfigurationError(
                    f"pass either config= or settings ({', '.join(given)}), not both"
                )
        else:
            if max_retries is not None:
                policy = settings.get("retry", RetryPolicy())
                if not isinstance(policy, RetryPolicy):
                    raise ConfigurationError(f"retry must be a RetryPolicy, got {policy!r}")
                settings["retry"] = attrs.evolve(policy, max_retries=max_retries)
            config = ClientConfig.from_env(**settings)
        if exchange is not None and session is not None:
            raise ConfigurationError("pass either session= or exchange=, not both")
        self.config = config
        self.transport = Transport(
            config,
            AiohttpExchange(config, session) if exchange is None else exchange,
            **({} if sleep is None else {"sleep": sleep}),
        )
        """The retry rules and the exchange: what the tracker and bulk sends call."""

    def __repr__(self) -> str:
        return f"<CampaignClient {self.config!r}>"

    async def aclose(self) -> None:
        """Close the connection pool (if the client owns it); idempotent."""
        await self.transport.aclose()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The pooled aiohttp session, created on first use in the running loop."""
        exchange = self.transport.exchange
        if not isinstance(exchange, AiohttpExchange):
            raise ConfigurationError("this client exchanges through exchange=, not aiohttp")
        return exchange.session

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
        return await self._deploy(
            wire.SEND_CAMPAIGN, CampaignAck, poll_id, users, timeout, max_retries
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
        return await self._deploy(
            wire.DEPLOY_LEGACY, LegacyDeployment, poll_id, users, timeout, max_retries
        )

    async def _deploy(
        self,
        endpoint: wire.Endpoint,
        answer: type[T],
        poll_id: str | int,
        users: Iterable[User],
        timeout: float | None,
        max_retries: int | None,
    ) -> T:
        problems: Problems = []
        given = users_tuple(users, problems)
        body = users_wire(given, problems)
        return await self._call(
            endpoint,
            wire.decoder(answer),
            timeout,
            max_retries,
            body_problems=problems,
            json={"users": body},
            users=given,
            poll_id=poll_id,
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

    # -- reads (retried) ------------------------------------------------------

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
        query = self._sessions_query(start, end, limit, cursor, problems)
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
        self._sessions_query(start, end, page_size, None, problems, limit_name="page_size")
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

    def _sessions_query(
        self,
        start: Timestamp | None,
        end: Timestamp | None,
        limit: int | None,
        cursor: str | None,
        problems: Problems,
        *,
        limit_name: str = "limit",
    ) -> dict[str, str | int]:
        names: SessionQueryNames = self.config.session_query
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

    # -- bulk sends -----------------------------------------------------------

    async def send_bulk(
        self,
        poll_id: str | int,
        users: _bulk.UserInput,
        *,
        chunk_size: int = _bulk.DEFAULT_CHUNK_SIZE,
        concurrency: int = 4,
        rate_limit: float | None = None,
        journal: _bulk.JournalPath | None = None,
        run: str | None = None,
        retry_rejected: bool = False,
        on_progress: _bulk.ProgressCallback | None = None,
        keep_accepted_users: bool = False,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> _bulk.BulkReport:
        """Stream ``users`` to ``poll_id`` in chunks, each user at most once;
        see :func:`campaignkit.bulk.send_bulk`."""
        return await _bulk.send_bulk(
            self,
            poll_id,
            users,
            chunk_size=chunk_size,
            concurrency=concurrency,
            rate_limit=rate_limit,
            journal=journal,
            run=run,
            retry_rejected=retry_rejected,
            on_progress=on_progress,
            keep_accepted_users=keep_accepted_users,
            timeout=timeout,
            max_retries=max_retries,
        )

    # -- tracking (campaignkit.tracker) ---------------------------------------

    def track(
        self,
        target: Target,
        *,
        until: str = "done",
        poll_interval: float = 1.0,
        max_interval: float = 30.0,
        timeout: float | None = None,
        not_found_grace: float = 30.0,
        resume: Mapping[str, Any] | None = None,
        on_state: OnState | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> CampaignTracker:
        r"""Follow a campaign: an async iterator of every deployment status change.

        ``target`` is a :class:`CampaignAck`, a ``launch_request_id`` or a
        ``status_url``. ``until="done"`` stops after the poll that shows
        ``DONE``; ``"settled"`` goes on until every deployment is also out of
        progress. Polls come ``poll_interval`` seconds after a change, backing
        off (jittered) up to ``max_interval`` while nothing changes; a
        ``Retry-After`` overrides the wait. ``timeout`` bounds the whole
        tracking (then :class:`campaignkit.TimeoutError` with ``last_status``).
        A 404 is retried for ``not_found_grace`` seconds after the first poll
        (the launch may not be visible yet). ``resume`` takes a
        :meth:`CampaignTracker.checkpoint`; ``on_state`` is called (and
        awaited) on each new ``CampaignState``; ``clock`` is the monotonic
        clock matching the client's ``sleep=`` (for tests). Mistakes are
        :class:`ValidationError`\ s.
        """
        options = TrackOptions(
            until, poll_interval, max_interval, timeout, not_found_grace, on_state, clock
        )
        return CampaignTracker(self.transport, target, options, resume=resume)

    def track_many(
        self,
        targets: Iterable[Target],
        *,
        concurrency: int = 8,
        until: str = "done",
        poll_interval: float = 1.0,
        max_interval: float = 30.0,
        timeout: float | None = None,
        not_found_grace: float = 30.0,
        resume: Mapping[str, Any] | None = None,
        on_state: OnState | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> TrackerGroup:
        """One merged stream of the changes of many launches (each change's
        ``launch_request_id`` says which), with at most ``concurrency`` status
        requests in flight on this client's pool; options as for :meth:`track`
        (``resume`` takes a ``TrackerGroup.checkpoint()``)."""
        options = TrackOptions(
            until, poll_interval, max_interval, timeout, not_found_grace, on_state, clock
        )
        return TrackerGroup(
            self.transport, targets, options, concurrency=concurrency, resume=resume
        )
