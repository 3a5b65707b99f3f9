"""BulkOptions: a bulk send's options as one frozen value, validated once
when made (each problem naming its field), taken by ``send_bulk``,
``submit_run``, ``BulkWorkers.submit`` and ``BulkWorkers`` alike, in the
keyword style or as ``options=``; never both."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers.exchange import Reply, ScriptedExchange
from hypothesis import given, settings
from hypothesis import strategies as st
from taskiq import InMemoryBroker

import campaignkit
from campaignkit import (
    Breaker,
    BulkOptions,
    CampaignClient,
    Canary,
    SendWindow,
    User,
    ValidationError,
)
from campaignkit.bulk import BulkOptionsDict
from campaignkit.ledger import SqliteLedger
from campaignkit.workers import BulkWorkers, submit_run

pytestmark = pytest.mark.timeout(30)

KEY = "sk_tst_H3nR8cW5yJ1qF6dB"
SEND = re.compile(r"^http://campaign\.test/v2/send-campaign/7$")

# For each field, values it refuses.
BAD: dict[str, st.SearchStrategy[Any]] = {
    "chunk_size": st.one_of(st.integers(max_value=0), st.booleans(), st.floats(), st.text()),
    "concurrency": st.one_of(st.integers(max_value=0), st.integers(min_value=1001), st.none()),
    "rate_limit": st.one_of(st.floats(max_value=0), st.integers(max_value=0), st.booleans()),
    "run": st.one_of(st.just(""), st.just("   "), st.integers()),
    "retry_rejected": st.one_of(st.integers(), st.none(), st.text()),
    "ignore_suppression": st.one_of(st.integers(), st.none(), st.text()),
    "keep_accepted_users": st.one_of(st.integers(), st.none(), st.text()),
    "follow": st.one_of(st.integers(), st.none(), st.text()),
    "on_progress": st.one_of(st.integers(), st.text(min_size=1)),
    "timeout": st.one_of(st.floats(max_value=0), st.booleans(), st.text()),
    "max_retries": st.one_of(st.integers(max_value=-1), st.booleans(), st.floats()),
    "interrupt_grace": st.one_of(st.floats(max_value=-0.001), st.booleans(), st.text()),
    "send_window": st.one_of(st.text(), st.integers()),
    "daily_limit": st.one_of(st.integers(max_value=0), st.booleans()),
    "lines": st.one_of(st.text(min_size=1), st.just(["not a number"]), st.just(["57300", "57300"])),
    "tz_for": st.one_of(st.integers(), st.text(min_size=1)),
    "follow_timeout": st.one_of(st.floats(max_value=0), st.booleans(), st.text()),
    "canary": st.one_of(st.integers(), st.text(), st.just({"size": 200})),
}


def read_nothing() -> Iterator[User]:
    raise AssertionError("the users were read")
    yield  # a generator


def test_every_field_is_a_keyword_of_the_keyword_style() -> None:
    # The keyword style's types are BulkOptions' fields, one for one.
    fields = {f.name for f in attrs.fields(BulkOptions) if f.init}
    assert set(BulkOptionsDict.__annotations__) == fields
    assert "BulkOptions" in campaignkit.__all__
    assert campaignkit.BulkOptions is BulkOptions


@settings(max_examples=150, deadline=None)
@given(data=st.data(), field=st.sampled_from(sorted(BAD)))
def test_a_bad_field_is_named_when_the_value_is_made(data: st.DataObject, field: str) -> None:
    value = data.draw(BAD[field])
    with pytest.raises(ValidationError) as raised:
        BulkOptions(**{field: value})
    assert [path for path, _ in raised.value.problems] == [field] or (
        field == "lines" and all(p.startswith("lines") for p, _ in raised.value.problems)
    )


@settings(max_examples=60, deadline=None)
@given(
    chunk_size=st.integers(min_value=1, max_value=2**63 - 1),
    concurrency=st.integers(min_value=1, max_value=1000),
    rate_limit=st.one_of(st.none(), st.floats(min_value=0.001, max_value=1e6)),
    retry_rejected=st.booleans(),
    max_retries=st.one_of(st.none(), st.integers(min_value=0, max_value=50)),
)
def test_good_values_make_a_value_equal_to_itself(
    chunk_size: int,
    concurrency: int,
    rate_limit: float | None,
    retry_rejected: bool,
    max_retries: int | None,
) -> None:
    given_ = dict(
        chunk_size=chunk_size,
        concurrency=concurrency,
        rate_limit=rate_limit,
        retry_rejected=retry_rejected,
        max_retries=max_retries,
    )
    options = BulkOptions(**given_)  # type: ignore[arg-type]
    assert options == BulkOptions.of(None, given_)
    assert attrs.evolve(options) == options
    assert BulkOptions.of(options, {}) is options


def test_every_problem_at_once_and_the_value_is_frozen() -> None:
    with pytest.raises(ValidationError) as raised:
        BulkOptions(chunk_size=0, concurrency=0, follow="yes")  # type: ignore[arg-type]
    assert [path for path, _ in raised.value.problems] == ["chunk_size", "concurrency", "follow"]
    options = BulkOptions(send_window=SendWindow("09:00", "18:00"), daily_limit=10)
    assert options.rules.daily_limit == 10
    assert options.rules.window == SendWindow("09:00", "18:00")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        options.chunk_size = 5  # type: ignore[misc]


async def test_send_bulk_takes_the_value_or_the_keywords_not_both(tmp_path: Path) -> None:
    exchange = ScriptedExchange()
    sent: list[bytes] = []

    def accept(request: Any) -> Reply:
        sent.append(request.body)
        return Reply(
            status=202,
            payload={
                "message": "queued",
                "id": "7",
                "batch_id": "b",
                "launch_request_id": f"lr-{len(sent)}",
                "status_url": "/x",
            },
        )

    exchange.post(SEND, callback=accept, repeat=True)
    users = [User(cellphone=f"300000000{i}", country_code="+57") for i in range(5)]
    async with CampaignClient(KEY, campaign_url="http://campaign.test", exchange=exchange) as c:
        with pytest.raises(ValidationError, match="options") as raised:
            await c.send_bulk(7, read_nothing(), options=BulkOptions(), chunk_size=2)
        assert raised.value.problems[0][0] == "options"
        bad: dict[str, Any] = {"concurrency": 0}
        with pytest.raises(ValidationError) as raised:
            await c.send_bulk(7, read_nothing(), options=BulkOptions(), **bad)
        assert raised.value.problems[0][0] == "options"
        # A bad poll id and a bad option: both named, nothing read.
        with pytest.raises(ValidationError) as raised:
            await c.send_bulk("", read_nothing(), chunk_size=0)
        assert [path for path, _ in raised.value.problems] == ["poll_id", "chunk_size"]
        assert sent == []
        by_value = await c.send_bulk(7, users, options=BulkOptions(chunk_size=2))
        by_keywords = await c.send_bulk(7, users, chunk_size=2)
    assert len(sent) == 6
    assert [chunk.size for chunk in by_value.accepted] == [2, 2, 1]
    assert [chunk.size for chunk in by_keywords.accepted] == [2, 2, 1]


async def test_submit_takes_the_value_and_refuses_what_only_a_send_in_process_takes(
    tmp_path: Path,
) -> None:
    handed: list[str] = []

    async def enqueue(run: str, chunk: str) -> None:
        handed.append(chunk)

    users = [User(cellphone=f"300000000{i}", country_code="+57") for i in range(5)]
    async with SqliteLedger(tmp_path / "run.db") as ledger:
        with pytest.raises(ValidationError) as raised:
            await submit_run(ledger, 7, read_nothing(), enqueue=enqueue, concurrency=8, follow=True)
        assert [path for path, _ in raised.value.problems] == ["concurrency", "follow"]
        # A canary's gate follows the run's first launches: with a client only.
        with pytest.raises(ValidationError) as raised:
            await submit_run(ledger, 7, read_nothing(), enqueue=enqueue, canary=Canary(size=5))
        assert [path for path, _ in raised.value.problems] == ["client"]
        with pytest.raises(ValidationError, match="options"):
            await submit_run(
                ledger, 7, read_nothing(), enqueue=enqueue, options=BulkOptions(), run="r"
            )
        options = BulkOptions(chunk_size=2, run="spring", daily_limit=3)
        run = await submit_run(ledger, 7, users, enqueue=enqueue, options=options)
        assert run == "spring"
        assert len(handed) == 3
        assert (await ledger.run_options(run))["daily_limit"] == 3


def test_the_workers_take_the_value_and_refuse_what_only_a_send_in_process_takes() -> None:
    workers = BulkWorkers(
        InMemoryBroker(), "unused.db", options=BulkOptions(timeout=5.0, max_retries=1)
    )
    assert workers.task.task_name == "campaignkit.send_chunk"
    with pytest.raises(ValidationError) as raised:
        BulkWorkers(InMemoryBroker(), "unused.db", concurrency=3)
    assert [path for path, _ in raised.value.problems] == ["concurrency"]
    with pytest.raises(ValidationError) as raised:
        BulkWorkers(InMemoryBroker(), "unused.db", timeout=-1)
    assert [path for path, _ in raised.value.problems] == ["timeout"]
    # A run's rules are its submit's: taken here, they would guard nothing.
    with pytest.raises(ValidationError, match="give it to submit") as raised:
        BulkWorkers(InMemoryBroker(), "unused.db", canary=Canary(size=5))
    assert [path for path, _ in raised.value.problems] == ["canary"]
    with pytest.raises(ValidationError) as raised:
        BulkWorkers(
            InMemoryBroker(),
            "unused.db",
            breaker=Breaker(max_failed=0.2, over=100),
            cooldown=timedelta(hours=24),
            daily_limit=10,
            chunk_size=50,
            max_retries=2,
        )
    assert sorted(path for path, _ in raised.value.problems) == [
        "breaker",
        "chunk_size",
        "cooldown",
        "daily_limit",
    ]


async def test_waiting_for_the_workers_checks_follow_before_it_reads_anything(
    tmp_path: Path,
) -> None:
    workers = BulkWorkers(InMemoryBroker(), tmp_path / "runs.db")
    with pytest.raises(ValidationError) as raised:
        await workers.wait("r", follow="yes", follow_timeout=0)  # type: ignore[arg-type]
    assert [path for path, _ in raised.value.problems] == ["follow", "follow_timeout"]
    assert not (tmp_path / "runs.db").exists()
