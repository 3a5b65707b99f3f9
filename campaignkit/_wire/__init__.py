"""The wire layer: requests built and answers read as plain data, no I/O.

Nothing here imports aiohttp or touches a socket, so every rule of the wire
(paths, query names, error mapping, decoding) is testable without a network.
"""
