"""The I/O seam: the ``Exchange`` protocol, its aiohttp adapter, and the
transport that runs one call through it with the endpoint's retry rules."""
