"""client_or_sandbox: the configured service when a key is set, else a sandbox."""

from __future__ import annotations

import pytest

from campaignkit.sandbox import client_or_sandbox


async def test_without_a_key_it_is_a_working_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAMPAIGNKIT_API_KEY", raising=False)
    async with client_or_sandbox(speed=10) as (client, sandbox):
        assert sandbox is not None
        assert client.config.api_key == sandbox.api_key
        assert client.config.campaign_url == sandbox.campaign_url
        assert len(await client.list_polls()) == 3


async def test_with_a_key_it_is_the_configured_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAMPAIGNKIT_API_KEY", "sk_live_from_env")
    monkeypatch.setenv("CAMPAIGNKIT_BASE_URL", "https://main.example.com")
    async with client_or_sandbox(speed=10) as (client, sandbox):
        assert sandbox is None
        assert client.config.api_key == "sk_live_from_env"
        assert client.config.base_url == "https://main.example.com"
