"""What a bulk send needs of a client: so that ``bulk`` never imports the
client module, which imports ``bulk`` (no ``client <-> bulk`` cycle)."""

from __future__ import annotations

from typing import Protocol

from .._io.transport import Transport
from ..config import ClientConfig


class BulkClient(Protocol):
    """A :class:`~campaignkit.CampaignClient`, as far as ``send_bulk`` uses it."""

    @property
    def config(self) -> ClientConfig: ...

    @property
    def transport(self) -> Transport: ...
