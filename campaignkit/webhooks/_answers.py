"""The error answer both endpoints give: ``{"error": <code>, "message": <text>}``."""

from __future__ import annotations

from aiohttp import web


def error_answer(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)
