"""Running the sandbox: in process (:class:`Sandbox`) or as a server (:func:`serve`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import aiohttp
import attrs
import orjson
from aiohttp import web

from ..status import DeploymentStatus
from ._admin import ADMIN_PREFIX, add_admin_routes
from ._app import build_app
from ._clock import Clock
from ._config import SandboxConfig
from ._faults import Faults
from ._keys import PREFIXES
from ._replies import Replies
from ._state import World
from ._webhooks import TemplateState

if TYPE_CHECKING:
    from ..client import CampaignClient

__all__ = ["Sandbox", "serve"]


class Sandbox:
    """The emulated service on one local port, as an async context manager.

    ``async with Sandbox(speed=50) as sb:`` serves ``sb.base_url``,
    ``sb.campaign_url`` and ``sb.agent_url`` (path prefixes of one server)
    for the company whose key is ``sb.api_key``; ``sb.admin_url`` is the
    sandbox-only admin API, with helper coroutines below.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        speed: float = 1.0,
        seed: int = 0,
        config: SandboxConfig | None = None,
        **options: Any,
    ) -> None:
        """``config`` fields may also be given as keyword arguments (``options``)."""
        base = config or SandboxConfig()
        self.config = attrs.evolve(base, speed=speed, seed=seed, **options)
        self.host = host
        self.port = port
        self.world = World(self.config, Clock(self.config.speed, self.config.start_time))
        self._runner: web.AppRunner | None = None
        self._replies: Replies | None = None
        self._http: aiohttp.ClientSession | None = None

    # ---- lifecycle -------------------------------------------------------
    async def start(self) -> None:
        self._replies = Replies(self.world)
        app = build_app(self.world, self._replies, Faults(self.config.seed), add_admin_routes)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        await self._replies.start()

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self._replies is not None:
            await self._replies.stop()
            self._replies = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # ---- addresses -------------------------------------------------------
    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return self.root_url + PREFIXES["main"]

    @property
    def campaign_url(self) -> str:
        return self.root_url + PREFIXES["campaign"]

    @property
    def agent_url(self) -> str:
        return self.root_url + PREFIXES["agent"]

    @property
    def admin_url(self) -> str:
        return self.root_url + ADMIN_PREFIX

    @property
    def api_key(self) -> str:
        return self.world.default.api_key

    @property
    def company_id(self) -> str:
        return self.world.default.id

    def client(self, **kwargs: Any) -> CampaignClient:
        """A :class:`~campaignkit.client.CampaignClient` wired to this sandbox."""
        from ..client import CampaignClient

        return CampaignClient(
            self.api_key,
            base_url=self.base_url,
            campaign_url=self.campaign_url,
            agent_url=self.agent_url,
            **kwargs,
        )

    # ---- admin helpers (over HTTP, like any other test) ------------------
    async def admin(self, method: str, path: str, body: Any = None, **params: str) -> Any:
        """Call an admin route; raises ``aiohttp.ClientResponseError`` on error,
        whose ``message`` is the sandbox's (naming the field at fault)."""
        if self._http is None:
            self._http = aiohttp.ClientSession()
        async with self._http.request(
            method, self.admin_url + path, json=body, params=params
        ) as response:
            if not response.ok:
                raise aiohttp.ClientResponseError(
                    response.request_info,
                    response.history,
                    status=response.status,
                    message=_message(await response.read()) or response.reason or "",
                    headers=response.headers,
                )
            return await response.json(content_type=None)

    async def snapshot(
        self, *, company: str | None = None, users: bool = True, launch: str | None = None
    ) -> Any:
        params = {"users": "1" if users else "0"}
        params |= {"company": company} if company else {}
        params |= {"launch": launch} if launch else {}
        return await self.admin("GET", "/state", **params)

    async def set_faults(self, *faults: dict[str, Any], seed: int | None = None) -> Any:
        body: dict[str, Any] = {"faults": list(faults)}
        if seed is not None:
            body["seed"] = seed
        return await self.admin("PUT", "/faults", body)

    async def clear_faults(self) -> Any:
        return await self.admin("DELETE", "/faults")

    async def fail_prefix(
        self,
        prefix: str,
        *,
        rate: float,
        status: DeploymentStatus | str = DeploymentStatus.FAILURE,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """Make ``rate`` of the numbers starting with ``prefix`` (``+57300``:
        country code and cellphone as sent) end in the failure ``status``,
        from the next launch on; answers the rule.

        Which numbers fail depends only on ``seed`` (default: the sandbox's)
        and the number, so reruns see the same ones fail. Numbers otherwise
        delivered are drawn; magic (``99NN``) and invalid numbers keep their
        outcome. A prefix's rule replaces its previous one; the longest
        matching prefix applies. Bad input raises ``aiohttp.ClientResponseError``
        (400) naming the field.
        """
        body: dict[str, Any] = {"prefix": prefix, "rate": rate, "status": str(status)}
        if seed is not None:
            body["seed"] = seed
        rule: dict[str, Any] = await self.admin("POST", "/failures", body)
        return rule

    async def failures(self) -> list[dict[str, Any]]:
        """The prefix rules, each with ``drawn`` (numbers of the prefix seen
        since set) and ``failed`` (of those, made to fail)."""
        rules: list[dict[str, Any]] = (await self.admin("GET", "/failures"))["failures"]
        return rules

    async def clear_failures(self) -> None:
        await self.admin("DELETE", "/failures")

    async def set_clock(
        self, *, now: float | None = None, speed: float | None = None, advance: float | None = None
    ) -> Any:
        body = {
            k: v for k, v in (("now", now), ("speed", speed), ("advance", advance)) if v is not None
        }
        return await self.admin("PUT", "/clock", body)

    async def now(self) -> float:
        return float((await self.admin("GET", "/clock"))["now"])

    async def reply(self, cellphone: str, **fields: Any) -> Any:
        return await self.admin("POST", "/reply", {"cellphone": cellphone, **fields})

    async def add_company(self, **fields: Any) -> Any:
        return await self.admin("POST", "/companies", fields)

    async def set_webhook(
        self,
        url: str | None = None,
        *,
        kinds: Sequence[str] | None = None,
        urls: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        poll_id: int | None = None,
        company: str | None = None,
    ) -> Any:
        """Attach webhook URLs (``url`` for every kind, or for ``kinds``;
        ``urls`` per kind) and static ``headers``, for the company or one poll."""
        # set_webhook(None) removes the URLs; headers or urls alone leave them.
        removes = urls is None and headers is None
        body: dict[str, Any] = {"url": url} if url is not None or removes else {}
        if kinds is not None:
            body["kinds"] = list(kinds)
        if urls is not None:
            body["urls"] = dict(urls)
        if headers is not None:
            body["headers"] = dict(headers)
        if poll_id is not None:
            body["poll_id"] = poll_id
        return await self.admin("PUT", f"/companies/{company or self.company_id}/webhook", body)

    async def change_template_status(
        self,
        name: str,
        status: TemplateState,
        *,
        affected_conversation_ids: Sequence[int] = (),
        event_id: str | None = None,
        company: str | None = None,
    ) -> dict[str, Any]:
        """Template ``name`` moves to ``status`` (e.g. ``"PAUSED"``,
        ``"DISABLED"``): the service's ``hsm.status`` event is POSTed, as
        published and with the static headers, to the company's
        ``template_status`` URL (see :meth:`set_webhook`).

        Answers ``{"event": body, "webhook": call}`` (the call as
        :meth:`webhook_calls` lists it; None without a URL). ``event_id``
        (default: a new one) sends an event again, as a redelivery. The
        published event gives no reason for the change, so neither does this.
        """
        body: dict[str, Any] = {
            "name": name,
            "status": status,
            "affected_conversation_ids": list(affected_conversation_ids),
        }
        if event_id is not None:
            body["event_id"] = event_id
        sent: dict[str, Any] = await self.admin(
            "POST", f"/companies/{company or self.company_id}/template-status", body
        )
        return sent

    async def set_flow(
        self, poll_id: int, questions: Sequence[str], *, company: str | None = None
    ) -> Any:
        """The questions the poll's flow asks in turn (each reply answers one)."""
        body = {"poll_id": poll_id, "questions": list(questions)}
        return await self.admin("PUT", f"/companies/{company or self.company_id}/flow", body)

    async def webhook_calls(self, *, company: str | None = None) -> list[dict[str, Any]]:
        """Every webhook call made for the company: kind, url, payload, status,
        answer, keys merged (and their types), error, seconds."""
        calls: list[dict[str, Any]] = await self.admin(
            "GET", f"/companies/{company or self.company_id}/webhook-calls"
        )
        return calls

    async def session(self, session_id: str) -> dict[str, Any]:
        """A session's ``keys``, their ``types`` (where given) and ``history``,
        as the sandbox holds them."""
        found: dict[str, Any] = await self.admin("GET", f"/sessions/{session_id}")
        return found

    async def add_sessions(
        self, poll_id: int, count: int, *, company: str | None = None, **fields: Any
    ) -> Any:
        return await self.admin(
            "POST",
            f"/companies/{company or self.company_id}/sessions",
            {"poll_id": poll_id, "count": count, **fields},
        )


def _message(body: bytes) -> str | None:
    """The ``message`` of an admin error body, if it has one."""
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    message = answer.get("message") if isinstance(answer, dict) else None
    return message if isinstance(message, str) else None


async def serve(
    host: str = "127.0.0.1", port: int = 8765, speed: float = 1.0, seed: int = 0, **options: Any
) -> None:
    """Run a sandbox until cancelled, printing its URLs and the API key."""
    async with Sandbox(host=host, port=port, speed=speed, seed=seed, **options) as sb:
        print(f"base_url:     {sb.base_url}")
        print(f"campaign_url: {sb.campaign_url}")
        print(f"agent_url:    {sb.agent_url}")
        print(f"admin_url:    {sb.admin_url}")
        print(f"api_key:      {sb.api_key}", flush=True)
        await asyncio.Event().wait()
