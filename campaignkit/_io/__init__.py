"""The I/O seam: the ``Exchange`` protocol (public in :mod:`campaignkit.testing`),
its aiohttp adapter, the transport that runs one call through it with the
endpoint's retry rules (and records raw answers), what the body logging shows,
and telemetry."""
