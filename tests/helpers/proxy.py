"""A TCP proxy in the test's own process, to make a shared server unreachable
for one test's connections only (the server itself is never stopped)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class CuttableProxy:
    """Forwards ``127.0.0.1:port`` to ``host:target_port`` until :meth:`cut`
    (every connection aborted, new ones refused), again after :meth:`restore`."""

    def __init__(self, host: str, target_port: int) -> None:
        self._target = (host, target_port)
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.Task[None]] = set()
        self.port = 0

    async def restore(self) -> None:
        """Listen (again, on the same port) and forward."""
        self._server = await asyncio.start_server(self._link, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Refuse new connections and abort every open one."""
        if self._server is not None:
            self._server.close()
            self._server = None
        links, self._links = self._links, set()
        for link in links:
            link.cancel()
        await asyncio.gather(*links, return_exceptions=True)

    def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = asyncio.ensure_future(self._forward(reader, writer))
        self._links.add(link)
        link.add_done_callback(self._links.discard)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers = [writer]
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
            writers.append(up_writer)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except OSError:
            pass
        finally:
            for each in writers:
                each.transport.abort()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    with contextlib.suppress(OSError):
        writer.write_eof()


@contextlib.asynccontextmanager
async def cuttable_proxy(host: str, port: int) -> AsyncIterator[CuttableProxy]:
    """A :class:`CuttableProxy` to ``host:port``, listening; cut on exit."""
    proxy = CuttableProxy(host, port)
    await proxy.restore()
    try:
        yield proxy
    finally:
        await proxy.cut()
