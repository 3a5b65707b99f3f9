"""Every count option of ``send_bulk`` and ``submit_run`` (so ``BulkWorkers.submit``)
refuses a number it cannot hold with a ValidationError naming it, before
anything is read, opened or sent: ``daily_limit=10**30`` escaped as a bare
``TypeError`` from the ledger, ``concurrency=10**30`` hung creating tasks."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.exchange import ScriptedExchange
from hypothesis import given, settings
from hypothesis import strategies as st

from campaignkit import CampaignClient, User, ValidationError
from campaignkit.bulk._options import MAX_CONCURRENCY, bulk_problems
from campaignkit.bulk._rules import MAX_COUNT, rules_problems
from campaignkit.ledger import SqliteLedger
from campaignkit.workers import submit_run

KEY = "sk_tst_bounds_0123456789"
USERS = [User(cellphone="3001234567", country_code="+57")]
MOST = {"chunk_size": MAX_COUNT, "concurrency": MAX_CONCURRENCY, "daily_limit": MAX_COUNT}

out_of_range = st.one_of(
    st.integers(min_value=MAX_COUNT + 1),
    st.integers(min_value=MAX_COUNT + 1).map(lambda n: -n),
    st.integers(max_value=0),
    st.integers(min_value=MAX_CONCURRENCY + 1, max_value=MAX_COUNT),
)


def read_nothing() -> Iterator[User]:
    raise AssertionError("the users were read")
    yield  # a generator


async def send_bulk_with(option: str, value: int, journal: Path) -> ScriptedExchange:
    exchange = ScriptedExchange()
    async with CampaignClient(KEY, campaign_url="http://campaign.test", exchange=exchange) as c:
        options: dict[str, Any] = {option: value}
        await c.send_bulk(7, read_nothing(), journal=journal, run="r", **options)
    return exchange


async def submit_with(option: str, value: int, journal: Path) -> None:
    async def enqueue(run: str, chunk: str) -> None:
        raise AssertionError("a chunk was enqueued")

    async with SqliteLedger(journal) as ledger:
        options: dict[str, Any] = {option: value}
        await submit_run(ledger, 7, read_nothing(), enqueue=enqueue, **options)


@settings(max_examples=60, deadline=None)
@given(option=st.sampled_from(sorted(MOST)), value=out_of_range)
def test_send_bulk_names_a_count_option_it_cannot_hold(option: str, value: int) -> None:
    if MAX_CONCURRENCY < value <= MAX_COUNT and option != "concurrency":
        value = -value  # in range for the other counts
    with tempfile.TemporaryDirectory() as folder:
        journal = Path(folder) / "run.db"
        with pytest.raises(ValidationError) as caught:
            asyncio.run(asyncio.wait_for(send_bulk_with(option, value, journal), 10))
        assert [path for path, _ in caught.value.problems] == [option]
        assert f"must be an int from 1 to {MOST[option]}" in str(caught.value)
        assert not journal.exists()


@settings(max_examples=40, deadline=None)
@given(option=st.sampled_from(["chunk_size", "daily_limit"]), value=out_of_range)
def test_submit_run_names_a_count_option_it_cannot_hold(option: str, value: int) -> None:
    if MAX_CONCURRENCY < value <= MAX_COUNT:
        value = -value
    with tempfile.TemporaryDirectory() as folder:
        with pytest.raises(ValidationError) as caught:
            asyncio.run(asyncio.wait_for(submit_with(option, value, Path(folder) / "r.db"), 10))
        assert [path for path, _ in caught.value.problems] == [option]


def test_the_largest_counts_are_taken() -> None:
    assert bulk_problems(7, USERS, chunk_size=MAX_COUNT, concurrency=MAX_CONCURRENCY)[1] == []
    rules, problems = rules_problems(None, MAX_COUNT, None, None)
    assert problems == []
    assert rules.daily_limit == MAX_COUNT


def test_a_huge_count_is_described_not_printed() -> None:
    # An int of more than 4300 digits has no repr: the message must not need one.
    _, problems = bulk_problems(7, USERS, chunk_size=10**5000, concurrency=1)
    assert problems == [
        ("chunk_size", f"must be an int from 1 to {MAX_COUNT}, got an int of 16610 bits")
    ]
