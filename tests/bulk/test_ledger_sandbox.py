"""The delivery ledger against the sandbox over real HTTP, on SQLite and on
PostgreSQL: whatever a rerun changes (order, chunk size, users added or
removed) and wherever a run crashes, the sandbox receives every recipient at
most once, and exactly once unless the report says it is ambiguous."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from helpers.ledgers import STORES, NewLedger
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from campaignkit import BulkReport, CampaignClient, User
from campaignkit.ledger import Claim, Ledger, PostgresLedger, SqliteLedger
from campaignkit.sandbox import Sandbox

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sandbox_options() -> dict[str, Any]:
    return {"seed": 3}


def people(numbers: Sequence[int]) -> list[User]:
    return [
        User(cellphone=f"31{n:08d}", country_code="+57", user_session_keys={"n": str(n)})
        for n in numbers
    ]


async def received(sb: Sandbox, company: str) -> Counter[str]:
    snapshot = await sb.snapshot(company=company, launch="-")
    return Counter(snapshot["companies"][0]["phone_counts"])


async def send(
    client: CampaignClient, ledger: Ledger, users: list[User], chunk_size: int, **options: Any
) -> BulkReport:
    poll = (await client.list_polls())[0].id
    async with ledger:
        return await client.send_bulk(
            poll, users, chunk_size=chunk_size, concurrency=3, journal=ledger, **options
        )


def ambiguous_phones(report: BulkReport) -> set[str]:
    return {u.country_code + u.cellphone for u in report.users_for("ambiguous")}


def assert_at_most_once(got: Counter[str], everyone: set[str], report: BulkReport) -> None:
    """Nobody twice; everybody once but those the last report calls ambiguous."""
    assert max(got.values(), default=1) == 1
    assert set(got) <= everyone
    assert everyone - set(got) <= ambiguous_phones(report)
    assert report.counts["accepted"] + report.counts["ambiguous"] == report.total


FIRST = list(range(40))
VARIANTS: dict[str, tuple[list[int], int]] = {
    "reversed": (FIRST[::-1], 7),
    "shuffled": (random.Random(5).sample(FIRST, len(FIRST)), 7),
    "one added": ([1000, *FIRST], 7),
    "one removed": (FIRST[1:], 7),
    "another chunk size": (FIRST, 13),
}


@pytest.mark.parametrize("variant", VARIANTS)
async def test_a_rerun_sends_only_who_was_never_sent(
    sb: Sandbox, new_ledger: NewLedger, variant: str
) -> None:
    numbers, chunk_size = VARIANTS[variant]
    async with sb.client() as client:
        first = await send(client, new_ledger(), people(FIRST), 7)
        assert first.counts["accepted"] == len(FIRST)
        again = await send(client, new_ledger(), people(numbers), chunk_size)
    got = await received(sb, sb.company_id)
    everyone = {f"+5731{n:08d}" for n in set(FIRST) | set(numbers)}
    assert_at_most_once(got, everyone, again)
    assert sum(not chunk.resumed for chunk in again.accepted) == (variant == "one added")
    # The run's report, read from its ledger: whoever either pass sent.
    assert sum(c.size for c in again.accepted) == len(set(FIRST) | set(numbers))


async def test_after_an_ambiguous_chunk_a_rerun_does_not_resend_it(
    sb: Sandbox, new_ledger: NewLedger
) -> None:
    # The service takes the second request, then fails to answer: ambiguous.
    await sb.set_faults({"kind": "500", "route": "send_campaign", "when": "after", "count": 1})
    async with sb.client() as client:
        first = await send(client, new_ledger(), people(FIRST[:7]), 7)
        assert first.counts["ambiguous"] == 7
        first = await send(client, new_ledger(), people(FIRST), 7)
        again = await send(client, new_ledger(), people(FIRST[::-1]), 5)
    got = await received(sb, sb.company_id)
    assert ambiguous_phones(again) == {f"+5731{n:08d}" for n in FIRST[:7]}
    assert_at_most_once(got, {f"+5731{n:08d}" for n in FIRST}, again)
    assert set(got) == {f"+5731{n:08d}" for n in FIRST}  # the ambiguous ones did arrive


class Crash(Exception):
    """Stands for a kill -9 at one point of a run."""


class CrashingLedger:
    """Forwards to a ledger; raises :class:`Crash` at the ``at``-th claim,
    either right after it is committed or after its request, before its
    outcome is recorded."""

    def __init__(self, ledger: Ledger, at: int, after_request: bool) -> None:
        self.ledger, self.at, self.after_request = ledger, at, after_request
        self.claimed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ledger, name)

    async def claim(self, run: str, chunk: str, *, owner: str = "") -> Claim | None:
        claim = await self.ledger.claim(run, chunk, owner=owner)
        self.claimed += 1
        if self.claimed == self.at and not self.after_request:
            raise Crash
        return claim

    async def settle(self, run: str, claim: str, state: str, **fields: Any) -> None:
        if self.claimed >= self.at and self.after_request:
            raise Crash
        await self.ledger.settle(run, claim, state, **fields)


Ledger.register(CrashingLedger)


@pytest.mark.parametrize("store", STORES)
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    permutations=st.lists(st.randoms(use_true_random=False), min_size=1, max_size=3),
    crashes=st.lists(st.tuples(st.integers(1, 6), st.booleans()), min_size=1, max_size=3),
    chunk_sizes=st.lists(st.integers(1, 9), min_size=4, max_size=4),
)
def test_any_input_orders_and_crash_points_send_nobody_twice(
    store: str,
    tmp_path_factory: pytest.TempPathFactory,
    permutations: list[random.Random],
    crashes: list[tuple[int, bool]],
    chunk_sizes: list[int],
) -> None:
    numbers = list(range(30))
    orders = [rng.sample(numbers, len(numbers)) for rng in permutations]

    async def scenario(make: Callable[[], Ledger]) -> None:
        async with Sandbox(speed=50, seed=1) as sb:
            company = await sb.add_company()
            async with CampaignClient(
                company["api_key"],
                base_url=sb.base_url,
                campaign_url=sb.campaign_url,
                agent_url=sb.agent_url,
            ) as client:
                poll = (await client.list_polls())[0].id
                for i, (at, after_request) in enumerate(crashes):
                    order = orders[i % len(orders)]
                    async with make() as ledger:
                        crashing: Any = CrashingLedger(ledger, at, after_request)
                        with contextlib.suppress(Crash):
                            await client.send_bulk(
                                poll, people(order), chunk_size=chunk_sizes[i], journal=crashing
                            )
                final = await send(client, make(), people(orders[-1][::-1]), chunk_sizes[-1])
            got = await received(sb, company["company_id"])
            assert_at_most_once(got, {f"+5731{n:08d}" for n in numbers}, final)

    if store == "sqlite":
        path = tmp_path_factory.mktemp("ledger") / "run.db"
        asyncio.run(scenario(lambda: SqliteLedger(path)))
    else:
        from helpers import real_servers

        async def on_postgres() -> None:
            async for dsn in real_servers.fresh_postgres_schema():
                await scenario(functools.partial(PostgresLedger, dsn))

        asyncio.run(on_postgres())


async def test_the_ledger_reports_a_run_as_send_bulk_did(
    sb: Sandbox, new_ledger: NewLedger
) -> None:
    users: list[Any] = [
        *people(range(10)),
        *people([3, 4]),
        {"cellphone": "x", "country_code": "+57"},
    ]
    async with sb.client() as client:
        poll = (await client.list_polls())[0].id
        async with new_ledger() as ledger:
            sent = await client.send_bulk(poll, users, chunk_size=4, journal=ledger)
            info = await ledger.run_info(f"poll-{poll}")
            read = await ledger.report(f"poll-{poll}")
    assert sent.counts == {
        "accepted": 10,
        "rejected": 0,
        "ambiguous": 0,
        "deferred": 0,
        "invalid": 1,
        "duplicate": 2,
        "suppressed": 0,
    }
    assert read.counts == sent.counts
    assert read.total == sent.total == 13
    assert read.launch_request_ids == sent.launch_request_ids
    assert [d.position for d in read.duplicates] == [10, 11]
    assert info is not None
    assert (info.input_done, info.total) == (True, 13)
