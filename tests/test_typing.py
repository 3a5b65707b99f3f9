"""The public signatures are explicit: a misspelt option fails under mypy."""

from __future__ import annotations

import textwrap

import pytest
from mypy import api

pytestmark = pytest.mark.timeout(180)

PROGRAM = textwrap.dedent(
    """
    from campaignkit import CampaignAck, CampaignClient, sync

    async def main(ack: CampaignAck) -> None:
        async with CampaignClient("sk", campaign_url="http://h", {typo}) as client:
            client.track(ack, until="settled", {typo})
            client.track_many([ack], concurrency=2, {typo})

    def blocking(ack: CampaignAck) -> None:
        with sync.CampaignClient("sk", campaign_url="http://h", {typo}) as client:
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
    assert out.count('Unexpected keyword argument "untill"') == 6, out


def test_deployments_are_typed_as_a_read_only_sequence_of_deployment() -> None:
    program = textwrap.dedent(
        """
        import attrs
        from campaignkit import CampaignStatus, DeploymentStatus

        def read(status: CampaignStatus) -> None:
            reveal_type(status.deployments)
            reveal_type(status.deployments[0])
            reveal_type(status.deployments[1:])
            first = attrs.evolve(status.deployments[0], status=DeploymentStatus.DELIVERED)
            phones: list[str] = [d.cellphone for d in status.deployments]
            status.deployments.append(first)
        """
    )
    out, _, status = api.run(["--strict", "--no-error-summary", "-c", program])
    assert status == 1
    assert 'Revealed type is "typing.Sequence[campaignkit.models.Deployment]"' in out, out
    assert 'Revealed type is "campaignkit.models.Deployment"' in out, out
    assert '"Sequence[Deployment]" has no attribute "append"' in out, out
    assert out.count("error:") == 1, out
