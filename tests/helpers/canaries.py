"""What the canary's tests against the sandbox share: people who settle,
people who never do, the launches the sandbox took, a canary judged fast."""

from __future__ import annotations

from datetime import timedelta

from campaignkit import Canary, DeploymentStatus, User
from campaignkit.sandbox import Sandbox
from campaignkit.sandbox._outcomes import STATUSES

FAST = Canary(size=15, wait=timedelta(seconds=20), min_delivered=0.8, max_failed=0.05)


def people(numbers: range, prefix: str = "31") -> list[User]:
    return [User(cellphone=f"{prefix}{n:08d}", country_code="+57") for n in numbers]


def stuck(numbers: range) -> list[User]:
    """People whose deployment stays RECEIVED for good: never settled."""
    index = STATUSES.index(DeploymentStatus.RECEIVED)
    return [User(cellphone=f"33{n:04d}99{index:02d}", country_code="+57") for n in numbers]


async def launches(sb: Sandbox) -> list[list[str]]:
    """The cellphones of each launch the sandbox took, in order."""
    snapshot = await sb.snapshot()
    return [
        [u["cellphone"] for u in launch["users"]] for launch in snapshot["companies"][0]["launches"]
    ]
