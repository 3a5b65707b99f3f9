"""The aiohttp adapter of the I/O seam: the SDK's only aiohttp client code."""

from __future__ import annotations

import contextlib

import aiohttp
import yarl
from aiohttp.helpers import get_env_proxy_for_url

from .. import errors
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
                proxy_auth=proxy[1],
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
            raise errors.ConnectionError(
                f"cannot connect for {endpoint.name}: {exc.os_error or exc}", request_sent=False
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
