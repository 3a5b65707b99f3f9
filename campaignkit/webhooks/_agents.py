"""The assignment endpoint: which active agent takes a transferred conversation.

A transfer-methods block with an API destination calls your endpoint, which
answers with an agent ``id`` (recommended) or ``email`` from the agent listing.
The response shape is not published: :func:`agent_json` is the default answer,
``render=`` (e.g. :func:`plain_text`) answers otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from time import monotonic
from typing import Literal, Protocol

from aiohttp import web

from .._redaction import sdk_logger
from ..errors import CampaignKitError, ValidationError
from ..models import Agent
from ._answers import error_answer

logger = sdk_logger("campaignkit.webhooks")

Strategy = Literal["round_robin", "least_recent"]
Answer = Literal["id", "email"]
Render = Callable[[Agent, Answer], web.StreamResponse]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class NoAgentAvailableError(CampaignKitError):
    """No active agent (of the configured tag) can take the conversation."""


def agent_json(agent: Agent, answer: Answer) -> web.StreamResponse:
    """The default answer: ``{"agent_id": 17}`` or ``{"agent_email": "..."}``."""
    if answer == "email":
        return web.json_response({"agent_email": agent.email})
    return web.json_response({"agent_id": agent.id})


def plain_text(agent: Agent, answer: Answer) -> web.StreamResponse:
    """Answer with the bare id (``17``) or e-mail as ``text/plain``."""
    return web.Response(text=agent.email if answer == "email" else str(agent.id))


class AgentSource(Protocol):
    """What :class:`AgentPicker` needs of a client."""

    async def list_agents(self) -> list[Agent]: ...


class AgentPicker:
    """Picks the agent an assignment endpoint answers with.

    ``client`` is anything with an awaitable ``list_agents()`` (a
    :class:`~campaignkit.CampaignClient`). Its answer is cached for ``ttl``
    seconds; when a refresh fails and an older list exists, the older list is
    used (and the failure logged). ``tag`` keeps the agents having a tag of
    that name (a ``str``, compared case-insensitively) or id (an ``int``).
    ``strategy`` is ``"round_robin"`` (in order of agent id, continuing after
    the last agent picked even when the list changes) or ``"least_recent"``
    (the agent assigned longest ago; never-assigned agents first). Bad
    options raise :class:`~campaignkit.errors.ValidationError`.
    """

    def __init__(
        self,
        client: AgentSource,
        tag: str | int | None = None,
        ttl: float = 60.0,
        strategy: Strategy = "round_robin",
        answer: Answer = "id",
    ) -> None:
        problems = []
        if strategy not in ("round_robin", "least_recent"):
            wanted = "must be 'round_robin' or 'least_recent'"
            problems.append(("strategy", f"{wanted}, not {strategy!r}"))
        if answer not in ("id", "email"):
            problems.append(("answer", f"must be 'id' or 'email', not {answer!r}"))
        if ttl < 0:
            problems.append(("ttl", "must not be negative"))
        if problems:
            raise ValidationError(problems)
        self._client = client
        self.tag = tag
        self.ttl = ttl
        self.strategy: Strategy = strategy
        self.answer: Answer = answer
        self._cache: list[Agent] | None = None
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()
        self._last_id: int | None = None
        self._last_assigned: dict[int, int] = {}
        self._assignments = 0
        self.fetches = 0
        """How many times ``list_agents`` was called."""

    def invalidate(self) -> None:
        """Drop the cached agent list; the next pick fetches it again."""
        self._cache = None

    def _matches(self, agent: Agent) -> bool:
        if self.tag is None:
            return True
        if isinstance(self.tag, int):
            return any(t.id == self.tag for t in agent.tags)
        wanted = self.tag.casefold()
        return any(t.name.casefold() == wanted for t in agent.tags)

    async def agents(self) -> list[Agent]:
        """The active agents of the tag, by id, from the cache when fresh."""
        async with self._lock:
            fresh = self._cache is not None and monotonic() - self._fetched_at < self.ttl
            if not fresh:
                try:
                    listed = await self._client.list_agents()
                except CampaignKitError:
                    if self._cache is None:
                        raise
                    logger.warning(
                        "assignment: list_agents failed, using the cached list", exc_info=True
                    )
                else:
                    self.fetches += 1
                    self._cache = sorted(
                        (a for a in listed if self._matches(a)), key=lambda a: a.id
                    )
                    self._fetched_at = monotonic()
            assert self._cache is not None
            return list(self._cache)

    async def pick(self) -> Agent:
        """The next agent by the strategy; :class:`NoAgentAvailableError` if none."""
        agents = await self.agents()
        if not agents:
            tag = "" if self.tag is None else f" with tag {self.tag!r}"
            raise NoAgentAvailableError(f"no active agent{tag}")
        if self.strategy == "least_recent":
            chosen = min(agents, key=lambda a: (self._last_assigned.get(a.id, -1), a.id))
        else:
            last = self._last_id
            chosen = next((a for a in agents if last is None or a.id > last), agents[0])
        self._assignments += 1
        self._last_assigned[chosen.id] = self._assignments
        self._last_id = chosen.id
        return chosen

    def handler(self, render: Render | None = None) -> Handler:
        """An aiohttp handler (any method) answering with the picked agent.

        Default answer: :func:`agent_json`. No agent: ``503 {"error":
        "no_agent"}``; the agent listing failing with no cached list: ``502
        {"error": "agent_listing_failed"}``.
        """
        render_fn = render or agent_json

        async def assign(request: web.Request) -> web.StreamResponse:
            try:
                agent = await self.pick()
            except NoAgentAvailableError as exc:
                return error_answer(503, "no_agent", str(exc))
            except CampaignKitError as exc:
                logger.error("assignment: list_agents failed: %s", exc)
                return error_answer(502, "agent_listing_failed", "the agent listing failed")
            return render_fn(agent, self.answer)

        return assign
