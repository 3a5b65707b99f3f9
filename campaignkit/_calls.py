"""The service's eight calls, each a few lines over one helper that
validates, builds the request and sends it with the endpoint's retry rules."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from ._call_args import Timestamp, session_page, sessions_query, users_body
from ._input.validation import Problems, path_segment, raise_problems, session_keys_wire
from ._io.transport import Transport
from ._wire import sansio as wire
from .config import ClientConfig, header_items, header_problems
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
SessionKeys = Iterable[SessionKey] | Mapping[str, str]

_ACK = wire.decoder(CampaignAck)
_LEGACY = wire.decoder(LegacyDeployment)
_SESSION_UPDATE = wire.decoder(SessionUpdate)
_CAMPAIGN_STATUS = wire.decoder(CampaignStatus)


class ServiceCalls:
    """The calls of :class:`~campaignkit.CampaignClient`. Each takes, besides
    its arguments, ``timeout=`` (seconds for each request), ``max_retries=``
    and ``extra_headers=`` (added to its requests; never the auth header)."""

    config: ClientConfig
    transport: Transport

    def _call(
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
        extra_headers: Mapping[str, str] | None = None,
        **path: object,
    ) -> Awaitable[T]:
        """Validate the path parameters (reported before the body's problems)
        and the extra headers, build the request and give the send with the
        endpoint's retry rules, for the call to await: a plain function, not a
        coroutine, as each coroutine between a call and aiohttp is resumed at
        every wait of the exchange (benchmarks row 3)."""
        problems: Problems = []
        segments = {name: path_segment(name, value, problems) for name, value in path.items()}
        if extra_headers:
            problems += header_problems(
                header_items(extra_headers), "extra_headers", self.config.auth_header
            )
        if problems or body_problems:
            raise_problems([*problems, *body_problems])
        request = wire.build_request(
            self.config,
            endpoint,
            path_params=segments,
            query=query,
            json=json,
            users=users,
            extra_headers=extra_headers,
        )
        return self.transport.call(request, decode, timeout=timeout, max_retries=max_retries)

    # -- sends (never resent after an ambiguous failure) ----------------------

    async def send_campaign(
        self,
        poll_id: str | int,
        users: Iterable[User],
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> CampaignAck:
        """Queue a campaign of ``poll_id`` to ``users``; answered before anyone
        is messaged. Track it with :meth:`track`."""
        body = users_body(users)
        return await self._call(
            wire.SEND_CAMPAIGN,
            _ACK,
            timeout,
            max_retries,
            **body,
            extra_headers=extra_headers,
            poll_id=poll_id,
        )

    async def deploy_legacy(
        self,
        poll_id: str | int,
        users: Iterable[User],
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
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
        body = users_body(users)
        return await self._call(
            wire.DEPLOY_LEGACY,
            _LEGACY,
            timeout,
            max_retries,
            **body,
            extra_headers=extra_headers,
            poll_id=poll_id,
        )

    async def update_session(
        self,
        session_external_id: str,
        user_session_keys: SessionKeys,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> SessionUpdate:
        """Merge ``user_session_keys`` into the session a webhook named (its
        ``session_id``), and continue its conversation."""
        problems: Problems = []
        keys = session_keys_wire(user_session_keys, "user_session_keys", problems)
        return await self._call(
            wire.UPDATE_SESSION,
            _SESSION_UPDATE,
            timeout,
            max_retries,
            body_problems=problems,
            json={"user_session_keys": keys},
            extra_headers=extra_headers,
            session_external_id=session_external_id,
        )

    async def get_campaign_status(
        self,
        launch_request_id: str,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> CampaignStatus:
        """The campaign request's state and every deployment's status."""
        return await self._call(
            wire.CAMPAIGN_STATUS,
            _CAMPAIGN_STATUS,
            timeout,
            max_retries,
            extra_headers=extra_headers,
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
        extra_headers: Mapping[str, str] | None = None,
    ) -> SessionPage:
        """One page of session metadata of ``poll_id``. Without arguments the
        service answers the first 1000 sessions of the current year."""
        problems: Problems = []
        query = sessions_query(self.config.session_query, start, end, limit, cursor, problems)
        return await self._call(
            wire.LIST_SESSIONS,
            session_page,
            timeout,
            max_retries,
            body_problems=problems,
            query=query,
            extra_headers=extra_headers,
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
        extra_headers: Mapping[str, str] | None = None,
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
                extra_headers=extra_headers,
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
        extra_headers: Mapping[str, str] | None = None,
    ) -> list[HistoryEntry]:
        """The complete message history of one session."""
        return await self._call(
            wire.SESSION_HISTORY,
            wire.decoder(list[HistoryEntry]),
            timeout,
            max_retries,
            extra_headers=extra_headers,
            session_id=session_id,
        )

    async def list_polls(
        self,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> list[Poll]:
        """Every poll (conversation) of the company."""
        return await self._call(
            wire.LIST_POLLS,
            wire.decoder(list[Poll]),
            timeout,
            max_retries,
            extra_headers=extra_headers,
        )

    async def list_agents(
        self,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> list[Agent]:
        """The company's active agents (each can receive a conversation)."""
        return await self._call(
            wire.LIST_AGENTS,
            wire.decoder(list[Agent]),
            timeout,
            max_retries,
            extra_headers=extra_headers,
        )
