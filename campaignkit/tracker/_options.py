"""What a tracker is given: its options, checked once, and the small
interface it polls through (the client's transport satisfies it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, Protocol, TypeVar

import attrs
from tenacity.stop import StopBaseT
from tenacity.wait import WaitBaseT

from .._wire.decode import Decode
from .._wire.sansio import Request
from ..config import ClientConfig
from ..errors import ValidationError
from ..status import CampaignState

T = TypeVar("T")
Until = Literal["done", "settled"]
OnState = Callable[[CampaignState], "Awaitable[None] | None"]
Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class StatusSource(Protocol):
    """One HTTP exchange per poll, no retry (the tracker's loop retries),
    and the time between polls: a monotonic clock and a sleep."""

    @property
    def config(self) -> ClientConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def sleep(self) -> Sleep: ...

    async def attempt(self, request: Request, decode: Decode[T], timeout: float | None) -> T: ...


def _is_seconds(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@attrs.frozen
class TrackOptions:
    """The options of :meth:`CampaignClient.track` (documented on
    :class:`CampaignTracker`); a mistake is a :class:`ValidationError`."""

    until: str = "done"
    poll_interval: float = 1.0
    max_interval: float = 30.0
    timeout: float | None = None
    not_found_grace: float = 30.0
    on_state: OnState | None = None
    wait: WaitBaseT | None = None
    """A tenacity wait strategy in place of the default schedule."""
    stop: StopBaseT | None = None
    """A tenacity stop strategy in place of ``timeout``."""

    def __attrs_post_init__(self) -> None:
        problems = []
        if self.until not in ("done", "settled"):
            problems.append(("until", f"must be 'done' or 'settled', got {self.until!r}"))
        for name in ("poll_interval", "max_interval"):
            value = getattr(self, name)
            if not _is_seconds(value) or not value > 0:
                problems.append((name, "must be a positive number"))
        timeout = self.timeout
        if timeout is not None and (not _is_seconds(timeout) or not timeout > 0):
            problems.append(("timeout", "must be a positive number or None"))
        if not _is_seconds(self.not_found_grace) or not self.not_found_grace >= 0:
            problems.append(("not_found_grace", "must be a number >= 0"))
        if self.on_state is not None and not callable(self.on_state):
            problems.append(("on_state", "must be callable"))
        if self.wait is not None and not callable(self.wait):
            problems.append(("wait", "must be a tenacity wait strategy"))
        if self.stop is not None and not callable(self.stop):
            problems.append(("stop", "must be a tenacity stop strategy"))
        if self.stop is not None and timeout is not None:
            problems.append(("stop", "replaces timeout: give one of them"))
        if problems:
            raise ValidationError(problems)
