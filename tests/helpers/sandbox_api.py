"""A plain aiohttp caller for the sandbox (the ``api`` fixture), without the SDK."""

from __future__ import annotations

from typing import Any

import aiohttp
import attrs

from campaignkit.sandbox import Sandbox


@attrs.frozen
class Answer:
    status: int
    body: Any
    text: str
    headers: Any


class Api:
    """Raw HTTP calls to the sandbox with the default company's key."""

    def __init__(self, sb: Sandbox, http: aiohttp.ClientSession) -> None:
        self.sb = sb
        self.http = http

    @staticmethod
    def user(cellphone: str, *keys: tuple[str, str], **extra: Any) -> dict[str, Any]:
        """A user entry of a deploy body."""
        return {
            "country_code": "+52",
            "cellphone": cellphone,
            "user_session_keys": [{"key": k, "value": v} for k, v in keys],
            **extra,
        }

    async def call(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        data: bytes | None = None,
        key: str | None = "default",
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Answer:
        sent = dict(headers or {})
        if key is not None:
            sent.setdefault("Authorization", self.sb.api_key if key == "default" else key)
        if data is not None:
            sent.setdefault("Content-Type", "application/json")
        async with self.http.request(
            method, url, json=json, data=data, headers=sent, params=params, allow_redirects=False
        ) as response:
            text = await response.text()
            try:
                body = await response.json(content_type=None) if text else None
            except ValueError:
                body = None
            return Answer(response.status, body, text, response.headers)

    async def send(self, users: list[dict[str, Any]], poll_id: int = 1001, **kw: Any) -> Answer:
        return await self.call(
            "POST",
            f"{self.sb.campaign_url}/v2/send-campaign/{poll_id}",
            json={"users": users},
            **kw,
        )

    async def status(self, launch_id: str, **kw: Any) -> Answer:
        return await self.call("GET", f"{self.sb.campaign_url}/v2/send-campaign/{launch_id}", **kw)
