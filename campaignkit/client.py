"""``CampaignClient``: the eight calls of the service, awaitable."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime
from typing import Any

import aiohttp
import attrs

from . import _sansio as wire
from . import bulk as _bulk
from ._closing import AsyncClosing
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
from .tracker import CampaignTracker, Target, TrackerGroup

__all__ = ["CampaignClient"]

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
    ``CAMPAIGNKIT_AGENT_URL``. Use it as an async context manager (or call
    :meth:`aclose`); an injected ``session`` is left for its owner to close.
    ``timeout`` (seconds per request) and ``max_retries`` (retries after the
    first attempt) may also be given per call; other ``settings`` are fields of
    :class:`ClientConfig`. Pass either a whole ``config=`` or settings, not both.
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
        session: aiohttp.ClientSession | None = None,
        config: ClientConfig | None = None,
        sleep: Sleep | None = None,
        **settings: Any,
    ) -> None:
        named = {
            "api_key": api_key,
            "base_url": base_url,
            "campaign_url": campaign_url,
            "agent_url": agent_url,
            "timeout": timeout,
        }
        if config is not None:
            given = [name for name, value in named.items() if value is not None]
            given += [*settings, *(["max_retries"] if max_retries is not None else [])]
            if given:
                # A setting beside a whole config would be silently ignored.
                raise ConfigurationError(
                    f"pass either config= or settings ({', '.join(given)}), not both"
                )
        else:
            if max_retries is not None:
                retry = settings.get("retry", RetryPolicy())
                if not isinstance(retry, RetryPolicy):
                    raise ConfigurationError(f"retry must be a RetryPolicy, got {retry!r}")
                settings["retry"] = attrs.evolve(retry, max_retries=max_retries)
            settings.update((name, value) for name, value in named.items() if value is not None)
            config = ClientConfig.from_env(**settings)
        self.config = config
        transport_options: dict[str, Any] = {} if sleep is None else {"sleep": sleep}
        self._transport = Transport(config, session=session, **transport_options)

    def __repr__(self) -> str:
        return f"<CampaignClient {self.config!r}>"

    async def aclose(self) -> None:
        """Close the connection pool (if the client owns it); idempotent."""
        await self._transport.aclose()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The pooled aiohttp session, created on first use in the running loop."""
        return self._transport.session

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
        request = self._deploy_request(wire.SEND_CAMPAIGN, poll_id, users)
        return await self._transport.call(
            request, wire.decoder(CampaignAck), timeout=timeout, max_retries=max_retries
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
        request = self._deploy_request(wire.DEPLOY_LEGACY, poll_id, users)
        return await self._transport.call(
            request, wire.decoder(LegacyDeployment), timeout=timeout, max_retries=max_retries
        )

    def _deploy_request(
        self, endpoint: wire.Endpoint, poll_id: str | int, users: Iterable[User]
    ) -> wire.Request:
        problems: Problems = []
        segment = path_segment("poll_id", poll_id, problems)
        given = users_tuple(users, problems)
        body = users_wire(given, problems)
        raise_problems(problems)
        return wire.build_request(
            self.config,
            endpoint,
            path_params={"poll_id": segment},
            json={"users": body},
            users=given,
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
        segment = path_segment("session_external_id", session_external_id, problems)
        keys = session_keys_wire(user_session_keys, "user_session_keys", problems)
        raise_problems(problems)
        request = wire.build_request(
            self.config,
            wire.UPDATE_SESSION,
            path_params={"session_external_id": segment},
            json={"user_session_keys": keys},
        )
        return await self._transport.call(
            request, wire.decoder(SessionUpdate), timeout=timeout, max_retries=max_retries
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
        problems: Problems = []
        segment = path_segment("launch_request_id", launch_request_id, problems)
        raise_problems(problems)
        request = wire.build_request(
            self.config, wire.CAMPAIGN_STATUS, path_params={"launch_request_id": segment}
        )
        return await self._transport.call(
            request, wire.decoder(CampaignStatus), timeout=timeout, max_retries=max_retries
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
        request = self._sessions_request(poll_id, start, end, limit, cursor)
        return await self._transport.call(
            request, _session_page, timeout=timeout, max_retries=max_retries
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
        self._sessions_request(poll_id, start, end, page_size, None, limit_name="page_size")
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

    def _sessions_request(
        self,
        poll_id: str | int,
        start: Timestamp | None,
        end: Timestamp | None,
        limit: int | None,
        cursor: str | None,
        *,
        limit_name: str = "limit",
    ) -> wire.Request:
        names: SessionQueryNames = self.config.session_query
        problems: Problems = []
        segment = path_segment("poll_id", poll_id, problems)
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
        raise_problems(problems)
        return wire.build_request(
            self.config, wire.LIST_SESSIONS, path_params={"poll_id": segment}, query=query
        )

    async def get_session_history(
        self,
        session_id: str,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
    ) -> list[HistoryEntry]:
        """The complete message history of one session."""
        problems: Problems = []
        segment = path_segment("session_id", session_id, problems)
        raise_problems(problems)
        request = wire.build_request(
            self.config, wire.SESSION_HISTORY, path_params={"session_id": segment}
        )
        return await self._transport.call(
            request, wire.decoder(list[HistoryEntry]), timeout=timeout, max_retries=max_retries
        )

    async def list_polls(
        self, *, timeout: float | None = None, max_retries: int | None = None
    ) -> list[Poll]:
        """Every poll (conversation) of the company."""
        request = wire.build_request(self.config, wire.LIST_POLLS)
        return await self._transport.call(
            request, wire.decoder(list[Poll]), timeout=timeout, max_retries=max_retries
        )

    async def list_agents(
        self, *, timeout: float | None = None, max_retries: int | None = None
    ) -> list[Agent]:
        """The company's active agents (each can receive a conversation)."""
        request = wire.build_request(self.config, wire.LIST_AGENTS)
        return await self._transport.call(
            request, wire.decoder(list[Agent]), timeout=timeout, max_retries=max_retries
        )

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

    def track(self, target: Target, **options: Any) -> CampaignTracker:
        """Follow a campaign: an async iterator of every deployment status change.

        ``target`` is a :class:`CampaignAck`, a ``launch_request_id`` or a
        ``status_url``; ``options`` are those of :class:`CampaignTracker`
        (``until``, ``poll_interval``, ``max_interval``, ``timeout``,
        ``not_found_grace``, ``resume``, ``on_state``).
        """
        return CampaignTracker(self, target, **options)

    def track_many(
        self, targets: Iterable[Target], *, concurrency: int = 8, **options: Any
    ) -> TrackerGroup:
        """One merged stream of the changes of many launches (each change's
        ``launch_request_id`` says which), with at most ``concurrency`` status
        requests in flight on this client's pool; ``options`` as for
        :meth:`track` (``resume`` takes a ``TrackerGroup.checkpoint()``)."""
        return TrackerGroup(self, targets, concurrency=concurrency, **options)
