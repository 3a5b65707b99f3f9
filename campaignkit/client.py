"""``CampaignClient``: the eight calls of the service, awaitable."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any, Unpack

import aiohttp
import attrs
from tenacity.stop import StopBaseT
from tenacity.wait import WaitBaseT

from . import bulk as _bulk
from ._calls import ServiceCalls
from ._io.aiohttp_exchange import AiohttpExchange
from ._io.closing import AsyncClosing
from ._io.exchange import Exchange
from ._io.transport import RawAnswer, Transport, recording_answers
from .config import ClientConfig, RetryPolicy, SessionQueryNames
from .errors import ConfigurationError
from .tracker import CampaignTracker, OnState, Target, TrackerGroup, TrackOptions

__all__ = ["CampaignClient", "RawAnswer"]


class CampaignClient(ServiceCalls, AsyncClosing):
    """An async client of the Conversation Campaign and Session Service.

    Settings not given come from ``CAMPAIGNKIT_API_KEY``,
    ``CAMPAIGNKIT_BASE_URL``, ``CAMPAIGNKIT_CAMPAIGN_URL`` and
    ``CAMPAIGNKIT_AGENT_URL``; the others are those of :class:`ClientConfig`.
    Use it as an async context manager (or call :meth:`aclose`). ``timeout``
    (seconds per request) and ``max_retries`` (retries after the first
    attempt) may also be given per call. Pass either a whole ``config=`` or
    settings, not both.

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
