"""send_bulk against a scripted service (the exchange seam): chunking, buckets,
retries, the journal, CSV input, lazy consumption."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.exchange import Reply, ScriptedExchange, dropped_after_sending
from helpers.sqlite_files import sqlite_file

from campaignkit import (
    BulkReport,
    CampaignClient,
    CampaignState,
    ProgressUpdate,
    User,
    ausers_from_csv,
    users_from_csv,
)
from campaignkit._input.phones import PhoneSet
from campaignkit.bulk import InvalidInput
from campaignkit.errors import (
    AmbiguousSendError,
    AuthenticationError,
    BadRequestError,
    LedgerError,
    RateLimitError,
    ValidationError,
)
from campaignkit.ledger import SqliteLedger
from campaignkit.progress import run_update
from campaignkit.testing import FakeTime, Request

pytestmark = pytest.mark.timeout(20)

KEY = "sk_Qz7Wv4Xp9Rm2Lk8Jh5Tn3Bc6"
SEND = re.compile(r"^http://campaign\.test/v2/send-campaign/(?P<poll>[^/?]+)$")

Responder = Callable[[int, list[dict[str, Any]]], Any]


def ack(n: int, poll: str = "7") -> dict[str, str]:
    return {
        "message": "queued",
        "id": poll,
        "batch_id": f"batch-{n}",
        "launch_request_id": f"lr-{n}",
        "status_url": f"/v2/send-campaign/lr-{n}",
    }


class FakeService:
    """Answers send-campaign requests; records each request's users."""

    def __init__(self, respond: Responder | None = None) -> None:
        self.requests: list[list[dict[str, Any]]] = []
        self.respond = respond or (lambda n, users: Reply(status=202, payload=ack(n)))
        self.gate: asyncio.Event | None = None
        self.arrived = 0

    async def handle(self, request: Request) -> Reply:
        assert request.body is not None
        users = orjson.loads(request.body)["users"]
        self.arrived += 1
        if self.gate is not None:
            await self.gate.wait()
        self.requests.append(users)
        result = self.respond(len(self.requests) - 1, users)
        if isinstance(result, BaseException):
            raise result
        return result

    @property
    def phones(self) -> list[str]:
        return [u["country_code"] + u["cellphone"] for users in self.requests for u in users]


@pytest.fixture
def mocked() -> ScriptedExchange:
    return ScriptedExchange()


@pytest.fixture
async def client(mocked: ScriptedExchange) -> AsyncIterator[CampaignClient]:
    async with CampaignClient(
        KEY,
        base_url="http://main.test",
        campaign_url="http://campaign.test",
        agent_url="http://agent.test",
        exchange=mocked,
    ) as c:
        FakeTime().install(c)
        yield c


def serve(mocked: ScriptedExchange, service: FakeService) -> FakeService:
    mocked.post(SEND, callback=service.handle, repeat=True)
    return service


def people(n: int, start: int = 0) -> list[User]:
    return [
        User(cellphone=f"555{i:07d}", country_code="+1", user_session_keys={"n": str(i)})
        for i in range(start, start + n)
    ]


# -- chunking and buckets -----------------------------------------------------


async def test_chunks_in_input_order_with_acks(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    service = serve(mocked, FakeService())
    report = await client.send_bulk(7, people(25), chunk_size=10, concurrency=1)
    assert [len(users) for users in service.requests] == [10, 10, 5]
    assert service.phones == [f"+1555{i:07d}" for i in range(25)]
    assert service.requests[0][3] == {
        "cellphone": "5550000003",
        "country_code": "+1",
        "user_session_keys": [{"key": "n", "value": "3"}],
    }
    assert [chunk.size for chunk in report.accepted] == [10, 10, 5]
    assert [list(chunk.positions) for chunk in report.accepted][2] == list(range(20, 25))
    assert report.launch_request_ids == ["lr-0", "lr-1", "lr-2"]
    assert report.counts == {
        "accepted": 25,
        "rejected": 0,
        "ambiguous": 0,
        "deferred": 0,
        "invalid": 0,
        "duplicate": 0,
        "suppressed": 0,
    }
    assert report.total == 25
    assert report.complete
    assert report.elapsed > 0


async def test_concurrent_chunks_all_sent_once(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    service = serve(mocked, FakeService())
    report = await client.send_bulk("7", people(1000), chunk_size=37, concurrency=8)
    assert sorted(service.phones) == sorted(f"+1555{i:07d}" for i in range(1000))
    assert [chunk.index for chunk in report.accepted] == list(range(28))
    assert report.counts["accepted"] == 1000


async def test_invalid_and_duplicate_users_reported_not_sent(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    service = serve(mocked, FakeService())
    bad_user = User(cellphone="12a", country_code="1")
    users: list[Any] = [
        User(cellphone="555-100-0000", country_code="+1"),  # 0
        bad_user,  # 1 invalid
        {"cellphone": "5551000000", "country_code": "+1"},  # 2 duplicate of 0 (normalised)
        {
            "cellphone": "5552000000",
            "country_code": "+1",
            "user_session_keys": [{"key": "a", "value": "b"}],
        },  # 3 ok, dict
        {"cellphone": "5553000000", "country_code": "+1", "email": "x"},  # 4 unknown field
        "+15554000000",  # 5 not a user
        {
            "cellphone": "5555000000",
            "country_code": "+44",
            "user_session_keys": {"plan": "gold"},
        },  # 6 ok, mapping keys
        User(cellphone="5552000000", country_code="+1"),  # 7 duplicate of 3
        InvalidInput(reason="line 9: broken", row=9),  # 8 invalid from a reader
        User(cellphone="5556000000", country_code="+1", deployment_eta=-5),  # 9 invalid eta
    ]
    report = await client.send_bulk(7, users, chunk_size=2)
    assert service.phones == ["+15551000000", "+15552000000", "+445555000000"]
    assert service.requests[1][0]["user_session_keys"] == [{"key": "plan", "value": "gold"}]
    assert [(i.position, i.row) for i in report.invalid] == [
        (1, None),
        (4, None),
        (5, None),
        (8, 9),
        (9, None),
    ]
    reasons = [i.reason for i in report.invalid]
    assert "users[1].country_code" in reasons[0]
    assert "users[1].cellphone" in reasons[0]
    assert "unknown field: email" in reasons[1]
    assert "expected a User or a dict, got str" in reasons[2]
    assert reasons[3] == "line 9: broken"
    assert "users[9].deployment_eta" in reasons[4]
    assert [(d.position, d.phone) for d in report.duplicates] == [
        (2, "+15551000000"),
        (7, "+15552000000"),
    ]
    assert report.users_for("invalid")[0] is bad_user
    assert report.users_for("invalid")[2] == "+15554000000"
    assert report.users_for("duplicate")[1] == User(cellphone="5552000000", country_code="+1")
    assert report.total == 10
    assert sum(report.counts.values()) == report.total


async def test_ambiguous_500_is_reported_and_never_resent(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    def respond(n: int, users: list[dict[str, Any]]) -> Reply:
        if users[0]["cellphone"] == "5550000010":
            return Reply(status=500, payload={"detail": "boom"})
        return Reply(status=202, payload=ack(n))

    service = serve(mocked, FakeService(respond))
    report = await client.send_bulk(7, people(30), chunk_size=10, concurrency=2)
    assert len(service.requests) == 3  # the failed chunk went out exactly once
    assert len(service.phones) == len(set(service.phones)) == 30
    assert [chunk.index for chunk in report.ambiguous] == [1]
    chunk = report.ambiguous[0]
    assert isinstance(chunk.error, AmbiguousSendError)
    assert [u.cellphone for u in report.users_for("ambiguous")] == [
        f"555{i:07d}" for i in range(10, 20)
    ]
    assert report.counts["accepted"] == 20
    assert not report.complete


async def test_dropped_connection_after_sending_is_ambiguous(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    def respond(n: int, users: list[dict[str, Any]]) -> Any:
        # What the adapter makes of a server that closes once it read the request.
        return dropped_after_sending() if n == 0 else Reply(status=202, payload=ack(n))

    service = serve(mocked, FakeService(respond))
    report = await client.send_bulk(7, people(10), chunk_size=5, concurrency=1)
    assert len(service.requests) == 2
    assert [c.index for c in report.ambiguous] == [0]
    assert [c.index for c in report.accepted] == [1]


async def test_429_waits_and_retries(client: CampaignClient, mocked: ScriptedExchange) -> None:
    def respond(n: int, users: list[dict[str, Any]]) -> Reply:
        if n == 0:
            return Reply(status=429, headers={"Retry-After": "0"}, payload={"detail": "x"})
        return Reply(status=202, payload=ack(n))

    service = serve(mocked, FakeService(respond))
    report = await client.send_bulk(7, people(3), chunk_size=10)
    assert len(service.requests) == 2
    assert service.requests[0] == service.requests[1]
    assert report.counts["accepted"] == 3
    assert report.complete


async def test_429_after_every_retry_is_rejected_and_safe(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    service = serve(
        mocked, FakeService(lambda n, users: Reply(status=429, payload={"detail": "x"}))
    )
    report = await client.send_bulk(7, people(3), chunk_size=10, max_retries=1)
    assert len(service.requests) == 2
    assert isinstance(report.rejected[0].error, RateLimitError)
    assert len(report.users_for("rejected")) == 3


async def test_400_rejects_one_chunk_only(client: CampaignClient, mocked: ScriptedExchange) -> None:
    def respond(n: int, users: list[dict[str, Any]]) -> Reply:
        if users[0]["cellphone"] == "5550000000":
            # A 400 naming a user of the request is that request's, not fatal.
            detail = "Malformed request: users[0].country_code must start with +."
            return Reply(status=400, payload={"detail": detail})
        return Reply(status=202, payload=ack(n))

    service = serve(mocked, FakeService(respond))
    report = await client.send_bulk(7, people(6), chunk_size=2, concurrency=1)
    assert len(service.requests) == 3
    assert isinstance(report.rejected[0].error, BadRequestError)
    assert report.counts["accepted"] == 4


async def test_401_stops_sending_the_rest(client: CampaignClient, mocked: ScriptedExchange) -> None:
    service = serve(
        mocked, FakeService(lambda n, users: Reply(status=401, payload={"detail": "no"}))
    )
    report = await client.send_bulk(7, people(50), chunk_size=5, concurrency=1)
    assert len(service.requests) == 1
    # The whole input is read on, unsent: every input is rejected with the 401.
    assert isinstance(report.fatal, AuthenticationError)
    assert report.total == 50
    assert all(isinstance(c.error, AuthenticationError) for c in report.rejected)
    assert report.counts["rejected"] == report.total
    assert KEY not in repr(report)
    assert KEY not in str(report.rejected[0].error)


async def test_bad_poll_id_and_options_fail_before_sending(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    service = serve(mocked, FakeService())
    consumed = 0

    def gen() -> Iterator[User]:
        nonlocal consumed
        for user in people(5):
            consumed += 1
            yield user

    with pytest.raises(ValidationError) as info:
        await client.send_bulk("..", gen(), chunk_size=0, concurrency=-1, rate_limit=0)
    paths = [path for path, _ in info.value.problems]
    assert paths == ["poll_id", "chunk_size", "concurrency", "rate_limit"]
    with pytest.raises(ValidationError):
        await client.send_bulk(7, "+15550000000")  # type: ignore[arg-type]
    assert consumed == 0
    assert service.requests == []


async def test_rate_limit_spaces_requests(mocked: ScriptedExchange) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    serve(mocked, FakeService())
    async with CampaignClient(KEY, campaign_url="http://campaign.test", exchange=mocked) as client:
        client.transport.sleep = record
        client.transport.clock = lambda: 1000.0  # the waits pass at once
        report = await client.send_bulk(7, people(5), chunk_size=1, concurrency=5, rate_limit=20)
    assert report.counts["accepted"] == 5
    # The five start together: the first goes at once, each next one 1/20 s
    # after the one before (the waits pass at once, so they add up).
    assert sorted(waits) == pytest.approx([0.05, 0.10, 0.15, 0.20], abs=0.02)


# -- report --------------------------------------------------------------------


async def test_users_for_accepted_needs_keep(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    serve(mocked, FakeService())
    report = await client.send_bulk(7, people(4), chunk_size=3)
    assert report.accepted[0].users is None
    with pytest.raises(ValueError, match="keep_accepted_users=True"):
        report.users_for("accepted")
    with pytest.raises(ValueError, match="outcome must be one of"):
        report.users_for("lost")  # type: ignore[arg-type]
    kept = await client.send_bulk(7, people(4), chunk_size=3, keep_accepted_users=True)
    assert kept.users_for("accepted") == people(4)


async def test_report_repr_is_short_and_keyless(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    serve(mocked, FakeService(lambda n, users: Reply(status=500, body="x" * 5000)))
    report = await client.send_bulk(7, people(5000), chunk_size=100, concurrency=4)
    text = repr(report)
    assert len(text) < 300
    assert KEY not in text
    assert "5550000" not in text
    assert "ambiguous=5000 (50 chunks)" in text
    assert len(repr(report.ambiguous[0])) < 300
    assert isinstance(report, BulkReport)


async def test_progress_reports_final_counts(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    def respond(n: int, users: list[dict[str, Any]]) -> Reply:
        return Reply(status=500 if n == 1 else 202, payload=ack(n))

    serve(mocked, FakeService(respond))
    seen: list[ProgressUpdate] = []
    users: list[Any] = [*people(9), User(cellphone="x", country_code="+1"), people(1)[0]]
    await client.send_bulk(7, users, chunk_size=3, concurrency=1, on_progress=seen.append)
    last = seen[-1]
    assert (last.finished, last.state) == (True, CampaignState.DONE)
    assert (last.done, last.total, last.sent, last.failed, last.skipped) == (11, 11, 6, 4, 1)
    counts = {"accepted": 6, "rejected": 0, "ambiguous": 3, "deferred": 0, "invalid": 1}
    counts |= {"suppressed": 0, "duplicate": 1}
    by_state = {"planned": 0, "in_flight": 0, **counts}
    assert last.states == by_state
    # One type of progress everywhere: what the workers and the dashboard show of a run.
    assert last == run_update(by_state, 11, True)
    assert all(not update.finished for update in seen[:-1])


async def test_async_progress_callback_and_failing_callback_do_not_stop(
    client: CampaignClient, mocked: ScriptedExchange, caplog: pytest.LogCaptureFixture
) -> None:
    serve(mocked, FakeService())
    calls: list[int] = []

    async def record(progress: ProgressUpdate) -> None:
        calls.append(progress.states["accepted"])

    report = await client.send_bulk(7, people(4), chunk_size=2, on_progress=record)
    assert calls
    assert calls[-1] == 4  # the last call was awaited before send_bulk returned

    def broken(progress: ProgressUpdate) -> None:
        raise RuntimeError("callback bug")

    report = await client.send_bulk(7, people(4), chunk_size=2, on_progress=broken)
    assert report.counts["accepted"] == 4
    assert "on_progress raised" in caplog.text


async def test_cancelled_send_cancels_its_pending_progress_calls(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    service = serve(mocked, FakeService())
    service.gate = asyncio.Event()
    started: list[asyncio.Task[Any]] = []

    async def slow(progress: ProgressUpdate) -> None:
        started.append(asyncio.current_task())  # type: ignore[arg-type]
        await asyncio.sleep(60)

    task = asyncio.create_task(
        client.send_bulk(
            7, people(4), chunk_size=2, concurrency=1, on_progress=slow, interrupt_grace=0
        )
    )
    for _ in range(400):
        await asyncio.sleep(0.005)
        if service.arrived and started:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert started
    assert all(progress_call.done() for progress_call in started)


# -- input ---------------------------------------------------------------------


async def test_async_iterable_input(client: CampaignClient, mocked: ScriptedExchange) -> None:
    service = serve(mocked, FakeService())

    async def stream() -> AsyncIterator[Any]:
        for user in people(7):
            await asyncio.sleep(0)
            yield user
        yield {"cellphone": "5550000001", "country_code": "+1"}

    report = await client.send_bulk(7, stream(), chunk_size=3)
    assert len(service.phones) == 7
    assert report.total == 8
    assert [d.position for d in report.duplicates] == [7]


async def test_input_is_consumed_lazily(client: CampaignClient, mocked: ScriptedExchange) -> None:
    service = serve(mocked, FakeService())
    service.gate = asyncio.Event()
    consumed = 0

    def generate() -> Iterator[User]:
        nonlocal consumed
        for i in range(100_000):
            consumed += 1
            yield User(cellphone=f"555{i:07d}", country_code="+1")

    task = asyncio.create_task(client.send_bulk(7, generate(), chunk_size=100, concurrency=2))
    for _ in range(200):
        await asyncio.sleep(0.005)
        if service.arrived == 2:
            break
    await asyncio.sleep(0.05)
    # 2 chunks in flight, 2 queued, 1 being built (blocked on the full queue).
    assert service.arrived == 2
    assert consumed <= (2 * 2 + 1) * 100 + 1
    service.gate.set()
    report = await task
    assert consumed == 100_000
    assert report.counts["accepted"] == 100_000


async def test_an_input_error_is_raised_after_sending_what_was_read(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    service = serve(mocked, FakeService())

    def generate() -> Iterator[User]:
        yield from people(5)
        raise KeyError("source broke")

    with pytest.raises(KeyError, match="source broke") as info:
        await client.send_bulk(7, generate(), chunk_size=2)
    assert len(service.phones) == 4  # the two full chunks; the partial one is not sent
    assert any("after 5 items" in note for note in info.value.__notes__)


# -- the seen-phone set ----------------------------------------------------------


def test_phone_set_matches_a_set() -> None:
    rng = random.Random(5)
    phones = [
        f"+{rng.randint(0, 9999)}{rng.randint(0, 10 ** rng.randint(4, 15)):0{rng.randint(4, 15)}d}"
        for _ in range(20_000)
    ]
    phones += [*phones[:3000], "+01234", "+1234", "+00001234", "+9" * 1 + "1" * 19]
    packed, plain = PhoneSet(bits=4), set()
    for phone in phones:
        assert packed.add(phone) == (phone not in plain)
        plain.add(phone)
    assert len(packed) == len(plain)
    assert not packed.add("+01234")
    assert not packed.add("+91111111111111111111")


# -- journal (the delivery ledger) --------------------------------------------------


async def ledger_counts(path: Path, run: str = "poll-7") -> dict[str, int]:
    async with SqliteLedger(path) as ledger:
        return await ledger.counts(run)


def respond_by_phone(n: int, users: list[dict[str, Any]]) -> Reply:
    """Chunk of ...02 answers 502 (ambiguous), of ...04 answers 400 (rejected)."""
    if users[0]["cellphone"] == "5550000002":
        return Reply(status=502, payload={"detail": "gw"})
    if users[0]["cellphone"] == "5550000004":
        detail = "Malformed request: users[0].cellphone must be a non-empty string."
        return Reply(status=400, payload={"detail": detail})
    return Reply(status=202, payload=ack(n))


async def test_journal_records_each_recipient_outcome(
    client: CampaignClient, mocked: ScriptedExchange, tmp_path: Path
) -> None:
    serve(mocked, FakeService(respond_by_phone))
    journal = tmp_path / "run.db"
    await client.send_bulk(7, people(6), chunk_size=2, concurrency=1, journal=journal)
    counts = await ledger_counts(journal)
    assert (counts["accepted"], counts["ambiguous"], counts["rejected"]) == (2, 2, 2)
    assert counts["planned"] == counts["in_flight"] == 0
    with sqlite_file(journal) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_rerun_in_another_order_sends_nobody_again(
    client: CampaignClient, mocked: ScriptedExchange, tmp_path: Path
) -> None:
    service = serve(mocked, FakeService(respond_by_phone))
    journal = tmp_path / "run.db"
    first = await client.send_bulk(7, people(6), chunk_size=2, concurrency=1, journal=journal)
    service.requests.clear()
    again = list(reversed(people(6)))
    second = await client.send_bulk(7, again, chunk_size=4, concurrency=1, journal=journal)
    assert service.requests == []
    assert second.counts == {
        "accepted": 2,
        "rejected": 2,
        "ambiguous": 2,
        "deferred": 0,
        "invalid": 0,
        "duplicate": 0,
        "suppressed": 0,
    }
    assert all(chunk.resumed for chunk in second.accepted + second.rejected + second.ambiguous)
    assert second.acks == first.acks
    # Rebuilt from the ledger as the class it was, with a note on how to resend.
    error = second.rejected[0].error
    assert isinstance(error, BadRequestError)
    assert error.status == 400
    assert "retry_rejected=True" in " ".join(error.__notes__)
    assert isinstance(second.ambiguous[0].error, AmbiguousSendError)
    # Asked to, it sends the rejected recipients again, and only them.
    service.respond = lambda n, users: Reply(status=202, payload=ack(n))
    third = await client.send_bulk(
        7, again, chunk_size=4, concurrency=1, journal=journal, retry_rejected=True
    )
    assert sorted(service.phones) == ["+15550000004", "+15550000005"]
    assert third.counts["accepted"] == 4
    assert third.counts["ambiguous"] == 2


async def test_rerun_sends_only_users_added_and_not_the_removed_ones(
    client: CampaignClient, mocked: ScriptedExchange, tmp_path: Path
) -> None:
    service = serve(mocked, FakeService())
    journal = tmp_path / "run.db"
    await client.send_bulk(7, people(5), chunk_size=2, journal=journal)
    service.requests.clear()
    changed = [*people(1, start=9), *people(3, start=2)]  # 0 and 1 removed, 9 added
    report = await client.send_bulk(7, changed, chunk_size=3, journal=journal)
    assert service.phones == ["+15550000009"]
    # The report is the run's, read from its ledger: the removed users were sent by it.
    assert report.counts["accepted"] == 6
    assert [chunk.resumed for chunk in report.accepted].count(False) == 1


async def test_in_flight_recipients_of_a_stopped_run_are_ambiguous_not_resent(
    client: CampaignClient, mocked: ScriptedExchange, tmp_path: Path
) -> None:
    service = serve(mocked, FakeService())
    journal = tmp_path / "run.db"
    await client.send_bulk(7, people(4), chunk_size=2, concurrency=1, journal=journal)
    # As if the run had been killed while +15550000002/3 were in their request.
    with sqlite_file(journal) as conn:
        conn.execute(
            "UPDATE campaignkit_recipients SET state = 'in_flight', launch_request_id = NULL"
            " WHERE phone IN ('+15550000002', '+15550000003')"
        )
    service.requests.clear()
    report = await client.send_bulk(7, people(6), chunk_size=2, concurrency=1, journal=journal)
    assert service.phones == ["+15550000004", "+15550000005"]
    assert [u.cellphone for u in report.users_for("ambiguous")] == ["5550000002", "5550000003"]
    assert "in flight" in str(report.ambiguous[0].error)


async def test_journal_cancelled_mid_request_settles_it_ambiguous_after_the_grace(
    client: CampaignClient, mocked: ScriptedExchange, tmp_path: Path
) -> None:
    service = serve(mocked, FakeService())
    service.gate = asyncio.Event()
    journal = tmp_path / "run.db"
    task = asyncio.create_task(
        client.send_bulk(
            7, people(6), chunk_size=2, concurrency=1, journal=journal, interrupt_grace=0.2
        )
    )
    for _ in range(400):
        await asyncio.sleep(0.005)
        if service.arrived:
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    counts = await ledger_counts(journal)
    assert (counts["in_flight"], counts["ambiguous"], counts["accepted"]) == (0, 2, 0)
    service.gate = None
    report = await client.send_bulk(7, people(6), chunk_size=3, concurrency=1, journal=journal)
    assert [u.cellphone for u in report.users_for("ambiguous")] == ["5550000000", "5550000001"]
    assert service.phones == [f"+1555{i:07d}" for i in (2, 3, 4, 5)]


async def test_cancelled_mid_request_the_answer_within_the_grace_settles_it(
    client: CampaignClient, mocked: ScriptedExchange, tmp_path: Path
) -> None:
    service = serve(mocked, FakeService())
    gate = service.gate = asyncio.Event()
    journal = tmp_path / "run.db"
    seen: list[ProgressUpdate] = []
    task = asyncio.create_task(
        client.send_bulk(
            7, people(8), chunk_size=2, concurrency=2, journal=journal, on_progress=seen.append
        )
    )
    for _ in range(400):
        await asyncio.sleep(0.005)
        if service.arrived == 2:
            break
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # waiting for the two requests under way
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    # No new request started; the two under way were settled from their answers.
    assert service.arrived == 2
    counts = await ledger_counts(journal)
    assert (counts["accepted"], counts["ambiguous"], counts["in_flight"]) == (4, 0, 0)
    assert (seen[-1].states["accepted"], seen[-1].states["ambiguous"]) == (4, 0)
    # The last update counts as waiting every user read and not sent: 4, or 2
    # when the cancellation came before the input's last chunk was read (a
    # loaded machine), never one of those sent.
    last = seen[-1]
    assert (last.total, last.state) in ((8, CampaignState.CLAIMED), (6, CampaignState.CLAIMED))
    assert (last.states["accepted"], last.states["planned"]) == (4, last.total - 4)
    assert counts["planned"] <= last.states["planned"]
    # A rerun sends the rest, nobody twice.
    service.gate = None
    report = await client.send_bulk(7, people(8), chunk_size=3, concurrency=1, journal=journal)
    assert sorted(service.phones) == [f"+1555{i:07d}" for i in range(8)]
    assert report.counts["accepted"] == 8


async def test_a_run_belongs_to_one_poll(
    client: CampaignClient, mocked: ScriptedExchange, tmp_path: Path
) -> None:
    service = serve(mocked, FakeService())
    journal = tmp_path / "run.db"
    await client.send_bulk(7, people(2), journal=journal, run="spring")
    with pytest.raises(LedgerError, match="run 'spring'"):
        await client.send_bulk(8, people(2), journal=journal, run="spring")
    # Another poll without run= is another run: its users are sent.
    await client.send_bulk(8, people(2), journal=journal)
    assert len(service.requests) == 2
    with pytest.raises(ValidationError, match="need a journal"):
        await client.send_bulk(8, people(2), run="spring")


async def test_an_old_chunk_journal_is_refused(
    client: CampaignClient, mocked: ScriptedExchange, tmp_path: Path
) -> None:
    service = serve(mocked, FakeService())
    journal = tmp_path / "old.db"
    with sqlite_file(journal) as conn:
        conn.execute("CREATE TABLE chunks (id TEXT PRIMARY KEY, state TEXT)")
        conn.execute("INSERT INTO chunks VALUES ('x', 'accepted')")
    with pytest.raises(LedgerError, match="chunk journal"):
        await client.send_bulk(7, people(2), journal=journal)
    assert service.requests == []


# -- CSV ----------------------------------------------------------------------------


CSV_TEXT = (
    "country_code,cellphone,name,plan,deployment_eta\n"
    "+1,555 100 0000,Ann,gold,\n"  # line 2
    "+1,5551000001,Bob,silver,1900000000\n"  # 3
    "\n"  # 4 blank, skipped
    "+1,5551000002,Cy\n"  # 5 short
    "+ 1,5551000003,Di,gold,\n"  # 6 bad country code
    "+1,5551000004,Ed,gold,tomorrow\n"  # 7 bad eta
    '+44,5551000005,"Fa, Jr",gold,2030-01-01T00:00:00+00:00\n'  # 8
    "+1,5551000000,Ann again,gold,\n"  # 9 duplicate of line 2
)


def test_users_from_csv_streams_users_and_row_errors(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    path.write_text(CSV_TEXT)
    items = list(users_from_csv(path))
    assert len(items) == 7
    first = items[0]
    assert isinstance(first, User)
    assert first.cellphone == "555 100 0000"
    assert first.deployment_eta is None
    keys = [(k.key, k.value) for k in first.user_session_keys]
    assert keys == [("name", "Ann"), ("plan", "gold")]
    assert isinstance(items[1], User)
    assert items[1].deployment_eta == 1900000000
    errors = [(i.row, i.reason) for i in items if isinstance(i, InvalidInput)]
    assert [row for row, _ in errors] == [5, 6, 7]
    assert "expected 5 fields, got 3" in errors[0][1]
    assert "country_code" in errors[1][1]
    assert "deployment_eta" in errors[2][1]
    assert "tomorrow" in errors[2][1]
    assert isinstance(items[5], User)
    assert items[5].user_session_keys[0].value == "Fa, Jr"


def test_users_from_csv_bad_header(tmp_path: Path) -> None:
    path = tmp_path / "users.csv"
    path.write_text("phone,name,name\n+1,5550000000,a,b\n")
    with pytest.raises(ValidationError) as info:
        list(users_from_csv(path))
    text = str(info.value)
    assert "'country_code'" in text
    assert "'cellphone'" in text
    assert "repeats column: name" in text


async def test_send_bulk_from_csv_async(
    client: CampaignClient, mocked: ScriptedExchange, tmp_path: Path
) -> None:
    service = serve(mocked, FakeService())
    path = tmp_path / "users.csv"
    path.write_text(CSV_TEXT)
    items = [item async for item in ausers_from_csv(path, batch=2)]
    assert items == list(users_from_csv(path))
    report = await client.send_bulk(7, ausers_from_csv(path, batch=3), chunk_size=2)
    assert service.phones == ["+15551000000", "+15551000001", "+445551000005"]
    assert [(i.position, i.row) for i in report.invalid] == [(2, 5), (3, 6), (4, 7)]
    assert [d.position for d in report.duplicates] == [6]
    assert service.requests[1][0]["deployment_eta"] == 1893456000


async def test_empty_input_sends_nothing(client: CampaignClient, mocked: ScriptedExchange) -> None:
    service = serve(mocked, FakeService())
    report = await client.send_bulk(7, iter(()))
    assert service.requests == []
    assert report.total == 0
    assert report.complete
    assert report.counts == dict.fromkeys(report.counts, 0)


async def test_cancelled_before_it_starts_sending_it_stops_at_once(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    service = serve(mocked, FakeService())
    task = asyncio.create_task(client.send_bulk(7, people(100), chunk_size=2, concurrency=2))
    await asyncio.sleep(0)  # into send_bulk: its pipeline's tasks made, not started
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2)  # not the 10 s grace: nothing was under way
    assert len(service.requests) == 0
