"""``async with`` for the objects that hold resources and close with ``aclose()``."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncClosing:
    """``async with obj:`` awaits ``obj.aclose()`` on the way out."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
