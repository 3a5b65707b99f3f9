"""Who may use the dashboard: the checks every request goes through before a
page is served and the headers every answer carries.

- ``Host`` must name this server (a loopback name, an IP literal, the bound
  host or one allowed): a page of another site whose name an attacker
  re-points at 127.0.0.1 (DNS rebinding) is refused.
- With a token (required when bound beyond loopback), every request shows
  it: ``Authorization: Bearer``, or the cookie set by one visit of
  ``?token=`` (which redirects to the same URL without it).
- Requests another site's page makes (``<img>``, ``fetch``, forms) are
  refused: a foreign ``Origin``, or ``Sec-Fetch-Site`` other than
  same-origin outside a top-level navigation; anything but GET/HEAD must
  come from the dashboard's own pages.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import urlsplit

import attrs
from aiohttp import web

__all__ = ["COOKIE", "Access", "is_loopback", "new_token"]

COOKIE = "campaignkit_dashboard"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
_TOKEN = re.compile(r"[!-~]+")
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""Scripts, styles and streams of the dashboard only; the bars' widths are
style attributes."""
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def new_token() -> str:
    """A fresh random token (32 URL-safe characters)."""
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the dashboard on this machine."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _hostname(host_header: str) -> str:
    """The name in a ``Host`` header, without port or IPv6 brackets."""
    name = urlsplit(f"//{host_header}").hostname
    return (name or "").lower()


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _lower_names(names: Iterable[str]) -> frozenset[str]:
    return frozenset(name.lower() for name in names)


def _check_token(access: object, attribute: object, token: str | None) -> None:
    # An empty token was printed as "?token=" and let nobody in.
    if token is not None and not _TOKEN.fullmatch(token):
        raise ValueError("a dashboard token must be visible ASCII characters, without spaces")


@attrs.frozen
class Access:
    """Who may use one dashboard: ``token`` (None: anybody who reaches it,
    for a loopback bind only) and the host names, besides loopback names and
    IP literals, its ``Host`` header may carry."""

    token: str | None = attrs.field(default=None, repr=False, validator=_check_token)
    hosts: frozenset[str] = attrs.field(default=frozenset(), converter=_lower_names)

    @classmethod
    def for_bind(cls, host: str, token: str | None = None, hosts: Iterable[str] = ()) -> Access:
        """The access of a dashboard bound to ``host``: beyond loopback a
        token is required (a new one unless given)."""
        if token is None and not is_loopback(host):
            token = new_token()
        return cls(token, {*hosts, host})

    def host_allowed(self, host_header: str | None) -> bool:
        name = _hostname(host_header or "")
        return bool(name) and (name in LOOPBACK_NAMES or name in self.hosts or _is_ip(name))

    def token_of(self, request: web.Request) -> str | None:
        """The token the request shows, if any (header, cookie or query)."""
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and value:
            return value.strip()
        return request.cookies.get(COOKIE) or request.query.get("token")

    def authorised(self, shown: str | None) -> bool:
        if self.token is None:
            return True
        return shown is not None and hmac.compare_digest(shown.encode(), self.token.encode())

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not self.host_allowed(request.host):
            raise web.HTTPMisdirectedRequest(text="this dashboard is not served under that name")
        _refuse_other_sites(request)
        if not self.authorised(self.token_of(request)):
            raise web.HTTPUnauthorized(
                text="this dashboard needs its token: open the address it printed when it started",
                headers={"WWW-Authenticate": 'Bearer realm="campaignkit dashboard"'},
            )
        if self.token is not None and "token" in request.query:
            # Moved to a cookie, out of the address bar, history and logs.
            query = {k: v for k, v in request.query.items() if k != "token"}
            response = web.HTTPSeeOther(request.rel_url.with_query(query).human_repr())
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="Lax", path="/")
            raise response
        return await handler(request)


def _refuse_other_sites(request: web.Request) -> None:
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
        raise web.HTTPForbidden(text="requests from other sites are refused")
    site = request.headers.get("Sec-Fetch-Site", "same-origin")
    if request.method not in SAFE_METHODS:
        if site != "same-origin":
            raise web.HTTPForbidden(text="changes come from the dashboard's own pages only")
    elif site not in ("same-origin", "none") and not _navigation(request):
        raise web.HTTPForbidden(text="requests from other sites are refused")


def _navigation(request: web.Request) -> bool:
    """A top-level visit (a link followed, an address typed), which shows a page."""
    mode, dest = request.headers.get("Sec-Fetch-Mode"), request.headers.get("Sec-Fetch-Dest")
    return mode == "navigate" and dest in (None, "document")


async def secure_headers(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: every answer, error pages included."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    response.headers.setdefault("Content-Security-Policy", PAGE_POLICY)
