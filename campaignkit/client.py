"""``CampaignClient``: the eight calls of the service, awaitable, and the
bulk sends and tracking built on them."""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from typing import Any, Self, TypeVar, Unpack

import aiohttp
import attrs
from tenacity.stop import StopBaseT
from tenacity.wait import WaitBaseT

from . import bulk as _bulk
from ._call_args import Timestamp, session_page, sessions_query, users_body
from ._input.validation import Problems, path_segment, raise_problems, session_keys_wire
from ._io.aiohttp_exchange import AiohttpExchange
from ._io.closing import AsyncClosing
from ._io.exchange import Exchange
from ._io.transport import RawAnswer, Transport, call_option_problems, recording_answers
from ._wire import sansio as wire
from .config import ClientConfig, RetryPolicy, SessionQueryNames, header_items, header_problems
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

__all__ = ["CampaignClient", "RawAnswer"]

T = TypeVar("T")
SessionKeys = Iterable[SessionKey] | Mapping[str, str]

_ACK = wire.decoder(CampaignAck)
_LEGACY = wire.decoder(LegacyDeployment)
_SESSION_UPDATE = wire.decoder(SessionUpdate)
_CAMPAIGN_STATUS = wire.decoder(CampaignStatus)


class CampaignClient(AsyncClosing):
    """An async client of the Conversation Campaign and Session Service.

    Settings not given come from ``CAMPAIGNKIT_API_KEY``,
    ``CAMPAIGNKIT_BASE_URL``, ``CAMPAIGNKIT_CAMPAIGN_URL`` and
    ``CAMPAIGNKIT_AGENT_URL``; the others are those of :class:`ClientConfig`.
    Use it as an async context manager (or call :meth:`aclose`). Pass either
    a whole ``config=`` or settings, not both.

    Each call takes, besides its arguments, ``timeout=`` (seconds for each
    request), ``max_retries=`` (retries after the first attempt) and
    ``extra_headers=`` (added to its requests; never the auth header);
    :meth:`with_options` gives a client whose calls all default to them.

    The I/O goes through ``exchange`` (default: an aiohttp session, or the
    injected ``session``, which is left for its owner to close): tests pass
    a :class:`campaignkit.testing.MockExchange` (see
    :class:`campaignkit.testing.Exchange`).
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
        default_headers: Mapping[str, str] | None = None,
        trust_env: bool | None = None,
        log_bodies: bool | None = None,
        config: ClientConfig | None = None,
        session: aiohttp.ClientSession | None = None,
        exchange: Exchange | None = None,
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
                ("default_headers", default_headers),
                ("trust_env", trust_env),
                ("log_bodies", log_bodies),
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
            config, AiohttpExchange(config, session) if exchange is None else exchange
        )
        """The retry rules and the exchange: what the tracker and bulk sends call."""

    def with_options(
        self,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Self:
        """A copy of this client whose calls (tracking and bulk sends
        included) default to ``timeout``, ``max_retries`` and ``extra_headers``
        (over the client's ``default_headers``); what is not given stays the
        client's, and a call's own arguments still come first::

            patient = client.with_options(timeout=120, max_retries=5)
            status = await patient.get_campaign_status(launch_request_id)

        The copy shares this client's connection pool, and its clock as it
        is now (install a :class:`campaignkit.testing.FakeTime` first):
        closing the copy leaves the pool open, closing this client closes it
        for both. Bad options are a :class:`ValidationError` naming them, here.
        """
        problems = call_option_problems(timeout, max_retries)
        headers = header_items(extra_headers)
        problems += header_problems(headers, "extra_headers", self.config.auth_header)
        raise_problems(problems)
        changes: dict[str, Any] = {}
        if headers:
            replaced = {name.lower() for name, _ in headers}
            kept = [pair for pair in self.config.default_headers if pair[0].lower() not in replaced]
            changes["default_headers"] = (*kept, *headers)
        if timeout is not None:
            changes["timeout"] = timeout
        if max_retries is not None:
            changes["retry"] = attrs.evolve(self.config.retry, max_retries=max_retries)
        config = attrs.evolve(self.config, **changes)
        options = copy.copy(self)
        options.config = config
        options.transport = self.transport.sharing(config)
        return options

    def __repr__(self) -> str:
        return f"<CampaignClient {self.config!r}>"

    async def aclose(self) -> None:
        """Close the connection pool (if the client owns it); idempotent."""
        await self.transport.aclose()

    def raw_answers(self) -> contextlib.AbstractContextManager[list[RawAnswer]]:
        """Record the raw answers of the calls made inside a ``with`` block::

            with client.raw_answers() as answers:
                polls = await client.list_polls()
            answers[-1].status, answers[-1].headers["Date"], answers[-1].body

        Every HTTP answer (status, headers, body bytes) of any call, retries
        and error answers included, in order, as a :class:`RawAnswer`. It
        follows the block's task and the tasks started in it.
        """
        return recording_answers()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The pooled aiohttp session, created on first use in the running loop."""
        exchange = self.transport.exchange
        if not isinstance(exchange, AiohttpExchange):
            raise ConfigurationError("this client exchanges through exchange=, not aiohttp")
        return exchange.session

    # -- the service's calls: one helper validates, builds and sends ----------

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

    # -- bulk sends -----------------------------------------------------------

    async def send_bulk(
        self,
        poll_id: str | int,
        users: _bulk.UserInput,
        *,
        options: _bulk.BulkOptions | None = None,
        **keywords: Unpack[_bulk.BulkOptionsDict],
    ) -> _bulk.BulkReport:
        """Stream ``users`` to ``poll_id`` in chunks, each user at most once,
        with ``options=BulkOptions(...)`` or its fields as keywords; see
        :func:`campaignkit.bulk.send_bulk`."""
        return await _bulk.send_bulk(self, poll_id, users, options=options, **keywords)

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
        wait: WaitBaseT | None = None,
        stop: StopBaseT | None = None,
    ) -> CampaignTracker:
        r"""Follow a campaign: an async iterator of every deployment status change.

        ``target`` is a :class:`CampaignAck`, a ``launch_request_id`` or a
        ``status_url``. ``until="done"`` stops after the poll that shows
        ``DONE``; ``"settled"`` goes on until every deployment is also out of
        progress. Polls come ``poll_interval`` seconds after a change, backing
        off (jittered) up to ``max_interval`` while nothing changes; a
        ``Retry-After`` overrides the wait. ``timeout`` bounds the whole
        tracking (then :class:`campaignkit.TimeoutError` with ``last_status``).
        The polls are a tenacity loop: ``wait=`` takes any tenacity wait
        strategy in place of that schedule (each poll's result is the number
        of changes it read; a ``Retry-After`` still comes first), ``stop=``
        any stop strategy in place of ``timeout``, ending tracking as it does.
        A 404 is retried for ``not_found_grace`` seconds after the first poll
        (the launch may not be visible yet). ``resume`` takes a
        :meth:`CampaignTracker.checkpoint`; ``on_state`` is called (and
        awaited) on each new ``CampaignState``. Mistakes are
        :class:`ValidationError`\ s.
        """
        options = TrackOptions(
            until, poll_interval, max_interval, timeout, not_found_grace, on_state, wait, stop
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
        wait: WaitBaseT | None = None,
        stop: StopBaseT | None = None,
    ) -> TrackerGroup:
        """One merged stream of the changes of many launches (each change's
        ``launch_request_id`` says which), with at most ``concurrency`` status
        requests in flight on this client's pool; options as for :meth:`track`
        (``resume`` takes a ``TrackerGroup.checkpoint()``)."""
        options = TrackOptions(
            until, poll_interval, max_interval, timeout, not_found_grace, on_state, wait, stop
        )
        return TrackerGroup(
            self.transport, targets, options, concurrency=concurrency, resume=resume
        )
