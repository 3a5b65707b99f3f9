"""Settings of a sandbox instance."""

from __future__ import annotations

import attrs

__all__ = ["SandboxConfig"]

MiB = 1024 * 1024


@attrs.frozen(kw_only=True)
class SandboxConfig:
    """Behaviour knobs; durations are in sandbox seconds (see ``speed``)."""

    speed: float = attrs.field(default=1.0, validator=attrs.validators.gt(0))
    """How many sandbox seconds pass per real second."""
    seed: int = 0
    """Seeds ids, reply draws and fault rates, so runs are reproducible."""
    step_seconds: float = attrs.field(default=1.0, validator=attrs.validators.gt(0))
    """How long each deployment status is held before the next one."""
    claim_delay: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    """Time a launch request stays ``PENDING``."""
    dispatch_rate: float = attrs.field(default=1000.0, validator=attrs.validators.gt(0))
    """Deployments the runtime takes per second once a request is ``CLAIMED``."""
    reply_probability: float = attrs.field(
        default=0.0, validator=[attrs.validators.ge(0), attrs.validators.le(1)]
    )
    """Chance that a delivered user replies on their own (seeded)."""
    reply_delay: float = attrs.field(default=2.0, validator=attrs.validators.ge(0))
    """Time between delivery and a spontaneous reply."""
    legacy_enabled: bool = False
    """Serve the legacy deploy endpoint instead of answering 410 (retired)."""
    max_body_size: int = attrs.field(default=64 * MiB, validator=attrs.validators.gt(0))
    """Largest request body accepted; larger ones get 413."""
    start_time: float | None = None
    """Sandbox time at start (UNIX seconds); default: the wall clock."""
    webhook_timeout: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))
    """Real seconds a webhook call may take before it is given up (the service's 10)."""
    sessions_per_poll: int = attrs.field(default=5, validator=attrs.validators.ge(0))
    """Sessions every poll of a new company has out of the box."""
