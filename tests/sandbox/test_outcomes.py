"""Deployment lifecycles: magic numbers, campaign states, ETA, sending lines."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from campaignkit.sandbox import Sandbox
from campaignkit.status import PUSH_NOTIFICATION_MISSPELLING, DeploymentStatus

pytestmark = pytest.mark.timeout(10)

R, W, T, S, D = "RECEIVED", "RECEIVED_BY_WORKER", "RETRY", "SUCCESS", "DELIVERED"
FROZEN = 1e-6  # a clock speed at which nothing moves unless advanced

# The README's table: the path each magic number walks.
EXPECTED_PATHS: dict[int, list[str]] = {
    0: [R],
    1: [R, W],
    2: [R, W, T],
    3: [R, W, S],
    4: [R, W, S, D],
    5: [R, W, PUSH_NOTIFICATION_MISSPELLING],
    6: [R, "REVOKED"],
    7: [R, "VALIDATION_ERROR"],
    9: [R, "INVALID_POLL"],
    14: [R, W, T, "FAILURE"],
}
for _nn, _status in enumerate(DeploymentStatus):
    EXPECTED_PATHS.setdefault(_nn, [R, W, _status.value])


async def test_all_thirty_magic_numbers(api: Any, sb: Sandbox) -> None:
    users = [api.user(f"55100099{nn:02d}") for nn in range(30)] + [api.user("5510001234")]
    ack = (await api.send(users)).body
    await sb.set_clock(advance=60)
    record = (await api.status(ack["launch_request_id"])).body
    assert record["status"] == "DONE"
    wire = [d["status"] for d in record["deployments"]]
    expected = [status.value for status in DeploymentStatus] + [D]
    expected[5] = PUSH_NOTIFICATION_MISSPELLING
    assert wire == expected
    snapshot = await sb.snapshot(launch=ack["launch_request_id"])
    launch = snapshot["companies"][0]["launches"][0]
    for nn, entry in enumerate(launch["users"][:30]):
        assert [h["status"] for h in entry["history"]] == EXPECTED_PATHS[nn], nn
    assert [h["status"] for h in launch["users"][30]["history"]] == [R, W, S, D]


async def test_failure_holds_retry_for_three_retries(api: Any, sb: Sandbox) -> None:
    ack = (await api.send([api.user("5510009914")])).body
    await sb.set_clock(advance=60)
    snapshot = await sb.snapshot(launch=ack["launch_request_id"])
    history = snapshot["companies"][0]["launches"][0]["users"][0]["history"]
    retry, failure = history[2], history[3]
    step = sb.config.step_seconds
    assert failure["at"] - retry["at"] == pytest.approx(3 * step)


@pytest.mark.parametrize("sandbox_options", [{"step_seconds": 1.0}])
async def test_polling_faster_than_steps_sees_every_status(api: Any, sb: Sandbox) -> None:
    await sb.set_clock(speed=10)  # a 100 ms step; we poll every 10 ms
    ack = (await api.send([api.user("5510009914"), api.user("5510001111")])).body
    seen: list[list[str | None]] = [[], []]
    for _ in range(300):
        record = (await api.status(ack["launch_request_id"])).body
        for i, d in enumerate(record["deployments"]):
            if not seen[i] or seen[i][-1] != d["status"]:
                seen[i].append(d["status"])
        if [s[-1] for s in seen if s] == ["FAILURE", D]:
            break
        await asyncio.sleep(0.01)
    assert seen[0] == [None, R, W, T, "FAILURE"] or seen[0] == [R, W, T, "FAILURE"]
    assert seen[1][-4:] == [R, W, S, D]


@pytest.mark.parametrize("sandbox_options", [{"dispatch_rate": 1.0, "claim_delay": 2.0}])
async def test_campaign_pending_claimed_done(api: Any, sb: Sandbox) -> None:
    await sb.set_clock(speed=FROZEN)
    ack = (await api.send([api.user(f"551000000{i}") for i in range(3)])).body
    launch_id = ack["launch_request_id"]
    first = (await api.status(launch_id)).body
    assert (first["status"], first["deployments"]) == ("PENDING", [])
    await sb.set_clock(advance=2.5)
    claimed = (await api.status(launch_id)).body
    assert claimed["status"] == "CLAIMED"
    assert [d["status"] for d in claimed["deployments"]] == [R, None, None]
    assert all(
        set(d)
        == {"conversation_id", "service_id", "cellphone", "business_scope_id", "username", "status"}
        for d in claimed["deployments"]
    )
    await sb.set_clock(advance=3)
    done = (await api.status(launch_id)).body
    assert done["status"] == "DONE"
    assert None not in [d["status"] for d in done["deployments"]]


async def test_stuck_numbers_do_not_block_done(api: Any, sb: Sandbox) -> None:
    ack = (await api.send([api.user(f"55100099{nn:02d}") for nn in range(3)])).body
    await sb.set_clock(advance=3600)
    record = (await api.status(ack["launch_request_id"])).body
    assert record["status"] == "DONE"
    assert [d["status"] for d in record["deployments"]] == [R, W, T]


async def test_eta_holds_a_user_until_its_time(api: Any, sb: Sandbox) -> None:
    await sb.set_clock(speed=FROZEN)
    eta = int(await sb.now()) + 100
    users = [api.user("5510001111", deployment_eta=eta), api.user("5510002222")]
    ack = (await api.send(users)).body
    await sb.set_clock(advance=50)
    record = (await api.status(ack["launch_request_id"])).body
    assert record["status"] == "DONE"  # every user taken or scheduled
    assert [d["status"] for d in record["deployments"]] == [None, D]
    await sb.set_clock(now=eta + 0.5)
    record = (await api.status(ack["launch_request_id"])).body
    assert record["deployments"][0]["status"] == R
    await sb.set_clock(advance=10)
    record = (await api.status(ack["launch_request_id"])).body
    assert record["deployments"][0]["status"] == D


async def test_deployment_squad_chooses_the_line(api: Any, sb: Sandbox) -> None:
    first, second = (await sb.snapshot(users=False))["companies"][0]["lines"]
    squad = "deployment_squad"
    users = [
        api.user("5510000001", (squad, f"DS_{second}")),
        api.user("5510000002", (squad, f"DS_{first}")),
        api.user("5510000003", (squad, "DS_19999999999")),
        api.user("5510000004", (squad, second)),
        api.user("5510000005", (squad, f"DS_{first}"), (squad, f"DS_{second}")),
    ]
    ack = (await api.send(users)).body
    await sb.set_clock(advance=60)
    record = (await api.status(ack["launch_request_id"])).body
    assert [d["status"] for d in record["deployments"]] == [
        D,
        D,
        "VALIDATION_ERROR",
        "VALIDATION_ERROR",
        D,
    ]
    snapshot = await sb.snapshot(launch=ack["launch_request_id"])
    lines = [u["line"] for u in snapshot["companies"][0]["launches"][0]["users"]]
    assert lines[:4] == [second, first, None, None]
    assert lines[4] in (first, second)


async def test_non_digit_cellphone_is_invalid_phone(api: Any, sb: Sandbox) -> None:
    ack = (await api.send([api.user("55-abc-1234")])).body
    await sb.set_clock(advance=60)
    record = (await api.status(ack["launch_request_id"])).body
    assert record["deployments"][0]["status"] == "INVALID_PHONE"


async def test_snapshot_counts_each_phone(api: Any, sb: Sandbox) -> None:
    await api.send([api.user("5510000001"), api.user("5510000002")])
    await api.send([api.user("5510000001")])
    company = (await sb.snapshot())["companies"][0]
    assert company["received_users"] == 3
    assert company["phone_counts"] == {"+525510000001": 2, "+525510000002": 1}
    assert [launch["user_count"] for launch in company["launches"]] == [2, 1]


async def test_large_status_record_is_one_valid_document(api: Any, sb: Sandbox) -> None:
    users = [api.user(f"55{i:06d}88") for i in range(12_345)]  # more than two slices; not 99NN
    ack = (await api.send(users)).body
    await sb.set_clock(advance=60)
    record = (await api.status(ack["launch_request_id"])).body
    assert record["status"] == "DONE"
    assert len({d["conversation_id"] for d in record["deployments"]}) == 12_345
    # Mexican mobiles come back in WhatsApp's +52 1 form, as the network reports them.
    assert [d["cellphone"] for d in record["deployments"]] == ["1" + u["cellphone"] for u in users]
    assert {d["status"] for d in record["deployments"]} == {D}
