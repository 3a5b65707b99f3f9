"""The public signatures are explicit: a misspelt option fails under mypy."""

from __future__ import annotations

import textwrap

import pytest
from mypy import api

pytestmark = pytest.mark.timeout(180)

PROGRAM = textwrap.dedent(
    """
    from campaignkit import CampaignAck, CampaignClient

    async def main(ack: CampaignAck) -> None:
        async with CampaignClient("sk", campaign_url="http://h", {typo}) as client:
            client.track(ack, until="settled", {typo})
            client.track_many([ack], concurrency=2, {typo})
    """
)


def check(typo: str) -> tuple[str, int]:
    out, err, status = api.run(["--strict", "--no-error-summary", "-c", PROGRAM.format(typo=typo)])
    return out + err, status


def test_correct_calls_type_check() -> None:
    out, status = check("timeout=5.0")
    assert status == 0, out


def test_misspelt_options_fail_under_mypy() -> None:
    out, status = check("untill='done'")
    assert status == 1
    assert out.count('Unexpected keyword argument "untill"') == 3, out
