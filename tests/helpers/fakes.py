"""Time that passes at once: the public :class:`campaignkit.testing.FakeTime`,
installed on a client with ``fake.install(client)``."""

from __future__ import annotations

from campaignkit.testing import FakeTime

__all__ = ["FakeTime"]
