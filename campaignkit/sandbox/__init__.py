"""A faithful local emulator of the Conversation Campaign and Session Service.

``async with Sandbox(speed=50) as sb:`` or ``python -m campaignkit.sandbox``.
The guide "The sandbox" lists the magic cellphone numbers, admin routes and
faults; ``Sandbox.fail_prefix`` and ``Sandbox.change_template_status`` let
tests drive a run's guards (breaker, canary) end to end.
"""

from ._config import SandboxConfig
from ._connect import client_or_sandbox
from ._faults import FaultSpec
from ._server import Sandbox, serve

__all__ = ["FaultSpec", "Sandbox", "SandboxConfig", "client_or_sandbox", "serve"]
