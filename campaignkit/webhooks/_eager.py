"""Run a coroutine at once, in the caller's task, until it first waits.

Most callbacks answer without waiting on anything; running them inline spares
a task and a turn of the event loop per webhook (Python 3.12's eager task
factory does the same). One that does wait goes on in a task of its own, so
the caller can still give up on it at a deadline while it finishes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar, cast

T = TypeVar("T")


def run_eagerly(coro: Coroutine[Any, Any, T]) -> tuple[T | None, asyncio.Task[T] | None]:
    """``(result, None)`` if ``coro`` finished without waiting, else ``(None,
    task)`` running the rest of it; its exception is raised here if it failed
    before waiting."""
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return stop.value, None
    return None, asyncio.get_running_loop().create_task(_rest(coro, first))


async def _rest(coro: Coroutine[Any, Any, T], first: Any) -> T:
    return cast(T, await _Resume(coro, first))


class _Resume:
    """Hands what ``coro`` yields (the futures it waits on) to the task running
    this, and what the task sends or throws back to ``coro``."""

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        yielded = self._first
        while True:
            try:
                sent = yield yielded
            except BaseException as exc:  # cancellation included: it goes to coro
                try:
                    yielded = self._coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    yielded = self._coro.send(sent)
                except StopIteration as stop:
                    return stop.value
