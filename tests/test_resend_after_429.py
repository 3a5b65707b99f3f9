"""``RetryPolicy(resend_after_429=...)``: whether a send answered 429 is
resent (HTTP defines 429 as refused, so without effect: the default) or, when
that is not trusted, raised as an ambiguous send and never resent.

Against the sandbox, whose ``when="after"`` fault answers 429 after the
service has already processed the send: the case the switch exists for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.cli import first_poll, run, users_rows, write_csv

from campaignkit import (
    AmbiguousSendError,
    ConfigurationError,
    RateLimitError,
    RetryPolicy,
    User,
)
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(30)

USERS = [User(cellphone="5530001234", country_code="+52")]
FAST: dict[str, Any] = {"backoff_initial": 0.01, "backoff_max": 0.02}
LATE_429 = {"kind": "429", "route": "send_campaign", "count": 1, "when": "after"}


async def launches(sb: Sandbox) -> list[Any]:
    snapshot = await sb.snapshot(users=False)
    return [launch for company in snapshot["companies"] for launch in company["launches"]]


async def test_by_default_a_send_answered_429_is_resent(sb: Sandbox) -> None:
    await sb.set_faults(LATE_429)
    async with sb.client(retry=RetryPolicy(**FAST)) as client:
        ack = await client.send_campaign(1001, USERS)
    # The trust misplaced: the service had processed the first one too.
    assert ack.launch_request_id in [launch["launch_request_id"] for launch in await launches(sb)]
    assert len(await launches(sb)) == 2


async def test_not_trusting_429_makes_the_send_ambiguous_and_sends_once(sb: Sandbox) -> None:
    await sb.set_faults(LATE_429)
    async with sb.client(retry=RetryPolicy(resend_after_429=False, **FAST)) as client:
        with pytest.raises(AmbiguousSendError) as caught:
            await client.send_campaign(1001, USERS)
    assert isinstance(caught.value.cause, RateLimitError)
    assert caught.value.users == tuple(USERS)
    assert len(await launches(sb)) == 1


async def test_not_trusting_429_still_retries_reads(sb: Sandbox) -> None:
    await sb.set_faults({"kind": "429", "route": "list_polls", "count": 1})
    async with sb.client(retry=RetryPolicy(resend_after_429=False, **FAST)) as client:
        assert await client.list_polls()
    assert (await sb.admin("GET", "/faults"))["requests"]["list_polls"] == 2


async def test_a_send_refused_429_to_the_end_is_a_rate_limit_when_trusted(sb: Sandbox) -> None:
    await sb.set_faults({"kind": "429", "route": "send_campaign"})
    async with sb.client(retry=RetryPolicy(max_retries=1, **FAST)) as client:
        with pytest.raises(RateLimitError):
            await client.send_campaign(1001, USERS)
    assert await launches(sb) == []


@pytest.mark.parametrize("value", [0, 1, "no", None])
def test_resend_after_429_takes_only_a_bool(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="resend_after_429 must be True or False"):
        RetryPolicy(resend_after_429=value)


@pytest.mark.parametrize(("flags", "sent", "code"), [([], 2, 0), (["--no-resend-after-429"], 1, 4)])
async def test_the_command_line_switches_the_trust_too(
    sb: Sandbox, tmp_path: Path, flags: list[str], sent: int, code: int
) -> None:
    await sb.set_faults(LATE_429)
    users = write_csv(tmp_path / "users.csv", users_rows(1))
    result = await run(sb, *flags, "send", str(await first_poll(sb)), str(users))
    assert result.code == code, result.err
    assert len(await launches(sb)) == sent
