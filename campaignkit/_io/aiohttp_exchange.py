"""The aiohttp adapter of the I/O seam: the SDK's only aiohttp client code."""

from __future__ import annotations

import contextlib

import aiohttp
import yarl
from aiohttp.helpers import get_env_proxy_for_url

from .. import errors
from .._redaction import MASK, register
from .._wire.sansio import Request
from ..config import ClientConfig
from .exchange import Answer


class AiohttpExchange:
    """Exchanges over one pooled ``aiohttp.ClientSession``.

    The session is created inside the running loop on first use, unless one
    is injected; an injected session is never closed here.
    """

    def __init__(self, config: ClientConfig, session: aiohttp.ClientSession | None = None) -> None:
        self._config = config
        self._session = session
        self._owns_session = session is None
        self._closed = False
        self._default_timeout = self._client_timeout(config.timeout)
        self._proxies: dict[str, tuple[yarl.URL | None, aiohttp.BasicAuth | None]] = {}

    def _client_timeout(self, timeout: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(
            total=timeout, connect=min(self._config.connect_timeout, timeout)
        )

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise errors.CampaignKitError("the client is closed")
        if self._session is None:
            connector = aiohttp.TCPConnector(limit=self._config.max_connections)
            session = aiohttp.ClientSession(connector=connector)
            # aiohttp silently resends a GET once when a pooled connection
            # drops: our retry policy is the only one, so max_retries bounds
            # the requests a call makes (and the tracker counts every poll).
            if hasattr(session, "_retry_connection"):  # private: absent from some releases
                session._retry_connection = False
            self._session = session
        return self._session

    def _proxy(
        self, request: Request, url: yarl.URL
    ) -> tuple[yarl.URL | None, aiohttp.BasicAuth | None]:
        """The proxy for the request's host, from the environment (``HTTP(S)_PROXY``,
        ``NO_PROXY``, proxy credentials in ``~/.netrc``) when ``trust_env``.

        Read once per host and remembered (the exchange looks it up first),
        not by aiohttp's ``trust_env`` on every request (which reads the
        environment and ``~/.netrc`` each time, doubling a small call's CPU,
        and lets a ``~/.netrc`` entry replace the key).
        """
        proxy: tuple[yarl.URL | None, aiohttp.BasicAuth | None] = (None, None)
        if self._config.trust_env:
            with contextlib.suppress(LookupError):
                proxy = get_env_proxy_for_url(url)
        if proxy[0] is not None:
            if proxy[1] is not None:
                register(proxy[1].password)  # a secret like the key, wherever it is echoed
            if proxy[0].scheme not in ("http", "https") or not proxy[0].host:
                # aiohttp would fail the request with a bare InvalidURL.
                raise errors.ConfigurationError(
                    f"{_proxy_named(proxy, url)} is not a proxy URL (expected http://host:port)"
                )
        self._proxies[request.endpoint.host] = proxy
        return proxy

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns_session and self._session is not None:
            await self._session.close()

    async def __call__(self, request: Request, timeout: float) -> Answer:
        client_timeout = (
            self._default_timeout
            if timeout == self._config.timeout
            else self._client_timeout(timeout)
        )
        endpoint = request.endpoint
        url = yarl.URL(request.url, encoded=True)
        proxy = self._proxies.get(endpoint.host) or self._proxy(request, url)
        try:
            async with self.session.request(
                endpoint.method,
                url,
                data=request.body,
                headers=request.headers,
                timeout=client_timeout,
                allow_redirects=False,
                proxy=proxy[0],
                proxy_headers=None
                if proxy[1] is None
                else {"Proxy-Authorization": proxy[1].encode()},
            ) as response:
                length = response.content_length
                if length is None:
                    body = await self._read_capped(response)
                elif length > self._config.max_response_bytes:
                    raise errors.ResponseError(
                        f"answer of {length} bytes exceeds "
                        f"max_response_bytes={self._config.max_response_bytes}",
                        status=response.status,
                    )
                else:
                    body = await response.read()
                return Answer(response.status, response.headers, body)
        except aiohttp.ClientConnectorError as exc:
            # The proxy's own name or port failing is the proxy's, not the URL's.
            through = proxy[0] is not None and (exc.host, exc.port) == (
                proxy[0].host,
                proxy[0].port,
            )
            named = _proxy_named(proxy, url) if through else None
            raise errors.ConnectionError(
                f"cannot connect to {named or 'the service'} for {endpoint.name}: "
                f"{exc.os_error or exc}",
                request_sent=False,
                proxy=named,
            ) from None
        except aiohttp.ClientHttpProxyError as exc:
            # The proxy refused the tunnel (CONNECT): the request never left.
            named = _proxy_named(proxy, url)
            raise errors.ConnectionError(
                f"{named} refused to connect {endpoint.name} to {url.host}: "
                f"{exc.status} {exc.message}",
                request_sent=False,
                proxy=named,
            ) from None
        except aiohttp.ConnectionTimeoutError:
            raise errors.TimeoutError(
                f"{endpoint.name}: no connection within the connect timeout", request_sent=False
            ) from None
        except (aiohttp.ServerTimeoutError, TimeoutError):
            raise errors.TimeoutError(
                f"{endpoint.name}: no complete answer within {timeout:g} s", request_sent=True
            ) from None
        except (aiohttp.ClientError, OSError) as exc:
            raise errors.ConnectionError(
                f"{endpoint.name}: connection failed after the request was sent "
                f"({type(exc).__name__}: {exc})",
                request_sent=True,
            ) from None

    async def _read_capped(self, response: aiohttp.ClientResponse) -> bytes:
        """A body of unknown length, read up to ``max_response_bytes``."""
        limit = self._config.max_response_bytes
        chunks = []
        size = 0
        async for chunk in response.content.iter_chunked(1 << 20):
            size += len(chunk)
            if size > limit:
                raise errors.ResponseError(
                    f"answer exceeds max_response_bytes={limit}", status=response.status
                )
            chunks.append(chunk)
        return b"".join(chunks)


def _proxy_named(proxy: tuple[yarl.URL | None, aiohttp.BasicAuth | None], url: yarl.URL) -> str:
    """The proxy as an error names it: its URL, password masked, and the
    variable it came from."""
    shown, auth = proxy
    if shown is not None and auth is not None:
        shown = shown.with_user(auth.login).with_password(MASK if auth.password else None)
    return f"the proxy {str(shown)!r} ({url.scheme.upper()}_PROXY)"
