"""What ``client.track`` accepts (campaignkit.tracker._options): targets and
``status_url`` forms (resolved by the wire layer), option mistakes."""

from __future__ import annotations

import re

import pytest
from helpers.exchange import ScriptedExchange
from helpers.fakes import FakeTime
from helpers.tracking import (
    ACK,
    KEY,
    answer,
    collect,
    dep,
)

from campaignkit import (
    CampaignAck,
    CampaignClient,
    CampaignKitError,
)


@pytest.mark.parametrize(
    "status_url",
    [
        "https://evil.example.com/v2/send-campaign/lr-1",
        "//evil.example.com/v2/send-campaign/lr-1",
        "http://campaigns.example.com/v2/send-campaign/lr-1",  # other scheme, other origin
        "https://campaigns.example.com:8443/v2/send-campaign/lr-1",
        "https://user:pw@campaigns.example.com/v2/send-campaign/lr-1",
        "https://campaigns.example.com.evil.io/v2/send-campaign/lr-1",
        "ftp://campaigns.example.com/v2/send-campaign/lr-1",
        "/v2/send-campaign/lr 1",
        "/v2/send-campaign\\lr-1",
    ],
)
async def test_foreign_status_url_is_refused_before_any_request(
    scripted_client: CampaignClient, mocked: ScriptedExchange, status_url: str
) -> None:
    mocked.get(re.compile(".*"), payload=answer("DONE"), repeat=True)
    ack = CampaignAck("queued", "12", "b-1", "lr-1", status_url)
    with pytest.raises(CampaignKitError, match="status_url"):
        scripted_client.track(ack)
    assert mocked.requests == []


async def test_status_url_forms_and_path_prefix(
    fake_time: FakeTime, mocked: ScriptedExchange
) -> None:
    prefixed = "http://host.example.com/campaign"
    async with fake_time.install(
        CampaignClient(KEY, campaign_url=prefixed, exchange=mocked)
    ) as client:
        url = f"{prefixed}/v2/send-campaign/L1"
        same_origin = "http://HOST.example.com:80/campaign/v2/send-campaign/L1"
        targets: list[tuple[CampaignAck | str, str]] = [
            (CampaignAck("q", "1", "b", "L1", "/v2/send-campaign/L1"), url),
            ("/v2/send-campaign/L1", url),
            ("v2/send-campaign/L1", url),
            ("L1", url),
            (same_origin, same_origin),
        ]
        for target, expected in targets:
            tracker = client.track(target)
            assert tracker.launch_request_id == "L1"
            assert tracker._request.url == expected
        url = f"{prefixed}/v2/send-campaign/L1"
        mocked.get(url, payload=answer("DONE", dep(1, "DELIVERED"), launch="L1"))
        changes = await collect(client.track("L1"))
        assert [c.launch_request_id for c in changes] == ["L1"]
        (requested,) = mocked.requests
        assert requested.url == url
        assert requested.endpoint.method == "GET"
        assert requested.headers["Authorization"] == KEY
        # A launch id needing encoding stays one path segment.
        assert client.track("a b?c")._request.url.endswith("/v2/send-campaign/a%20b%3Fc")


async def test_invalid_options_are_validation_errors(scripted_client: CampaignClient) -> None:
    for options in (
        {"until": "forever"},
        {"poll_interval": 0},
        {"timeout": -1},
        {"not_found_grace": -1},
    ):
        with pytest.raises(CampaignKitError):
            scripted_client.track(ACK, **options)
    with pytest.raises(CampaignKitError):
        scripted_client.track(123)  # type: ignore[arg-type]
