"""Where the sandbox's application keeps its parts, and its hosts' path prefixes."""

from __future__ import annotations

from aiohttp import web
from aiohttp.web_urldispatcher import AbstractRoute

from ._faults import Faults
from ._http import RouteSpec
from ._replies import Replies
from ._state import World

PREFIXES = {"main": "/main", "campaign": "/campaign", "agent": "/agent"}

WORLD = web.AppKey("world", World)
REPLIES = web.AppKey("replies", Replies)
FAULTS = web.AppKey("faults", Faults)
SPECS = web.AppKey("specs", dict[AbstractRoute, RouteSpec])
