"""A fatal answer mid-run (a 404 for the poll, a 401, a 400 refusing the
request as a whole): no request leaves after it, yet the whole input is read,
and every valid user not sent is rejected with that error, in the report and
in the ledger alike (the report's total is the input's), and
``retry_rejected`` resends them once the cause is fixed."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.exchange import Reply, ScriptedExchange
from helpers.ledgers import CONFORMING, NewLedger, ledger_factory

from campaignkit import CampaignClient, User
from campaignkit.errors import BadRequestError, NotFoundError
from campaignkit.ledger import REJECTED, SqliteLedger
from campaignkit.sandbox import Sandbox, _app
from campaignkit.testing import FakeTime, Request

pytestmark = pytest.mark.timeout(30)

SEND = re.compile(r"^http://campaign\.test/v2/send-campaign/(?P<poll>[^/?]+)$")
RUN = "poll-7"


POLL_GONE = Reply(status=404, payload={"detail": "Poll not found"})


class Service:
    """202 to the first ``good`` requests, then ``refusal`` (default: a 404,
    the poll was deleted)."""

    def __init__(self, good: int, refusal: Reply = POLL_GONE) -> None:
        self.good = good
        self.refusal = refusal
        self.phones: list[str] = []
        self.answered = 0

    async def handle(self, request: Request) -> Reply:
        assert request.body is not None
        n, self.answered = self.answered, self.answered + 1
        if n >= self.good:
            return self.refusal
        self.phones += [
            u["country_code"] + u["cellphone"] for u in orjson.loads(request.body)["users"]
        ]
        ack = {"message": "queued", "id": "7", "batch_id": f"b{n}", "launch_request_id": f"lr-{n}"}
        return Reply(status=202, payload={**ack, "status_url": f"/v2/send-campaign/lr-{n}"})


@pytest.fixture(params=CONFORMING)
def new_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> NewLedger:
    return ledger_factory(request, tmp_path)


@pytest.fixture
def mocked() -> ScriptedExchange:
    return ScriptedExchange()


@pytest.fixture
async def client(mocked: ScriptedExchange) -> AsyncIterator[CampaignClient]:
    async with CampaignClient(
        "sk_tst_fatal_0123456789", campaign_url="http://campaign.test", exchange=mocked
    ) as c:
        FakeTime().install(c)
        yield c


def people(n: int) -> list[User]:
    return [User(cellphone=f"555{i:07d}", country_code="+1") for i in range(n)]


async def test_a_404_mid_run_rejects_every_unsent_recipient_in_the_ledger_too(
    client: CampaignClient, mocked: ScriptedExchange, new_ledger: NewLedger
) -> None:
    service = Service(good=3)
    mocked.post(SEND, callback=service.handle, repeat=True)
    users = people(1000)
    async with new_ledger() as ledger:
        report = await client.send_bulk(7, users, chunk_size=50, concurrency=4, journal=ledger)
        counts = await ledger.counts(RUN)
        rejected = [r async for r in ledger.records(RUN, [REJECTED])]
        info = await ledger.run_info(RUN)
        read_back = await ledger.report(RUN)
    assert isinstance(report.fatal, NotFoundError)
    # Recorded on the run: its report read from the ledger says what ended it.
    assert isinstance(read_back.fatal, NotFoundError)
    assert str(read_back.fatal) == str(report.fatal)
    assert report.counts["accepted"] == len(service.phones) == 150
    # Every input is accounted for, the same way in the report and the ledger.
    assert (report.total, report.counts["rejected"]) == (1000, 850)
    assert counts[REJECTED] == 850
    assert (read_back.total, read_back.counts) == (report.total, report.counts)
    assert {r.phone for r in rejected} == {
        u.country_code + u.cellphone for u in report.users_for("rejected")
    }
    assert all(r.detail and r.detail.startswith("NotFoundError") for r in rejected)
    assert all(isinstance(chunk.error, NotFoundError) for chunk in report.rejected)
    # The input after the fatal answer was read all the same: the run's input is whole.
    assert info is not None
    assert (info.input_done, info.total) == (True, 1000)
    assert info.stopped is not None

    # The poll is back: a rerun with retry_rejected sends exactly those rejected; nobody twice.
    service.good = 10**6
    async with new_ledger() as ledger:
        again = await client.send_bulk(
            7, users, chunk_size=50, concurrency=4, journal=ledger, retry_rejected=True
        )
        info = await ledger.run_info(RUN)
        counts = await ledger.counts(RUN)
    assert again.fatal is None
    assert sorted(service.phones) == sorted(u.country_code + u.cellphone for u in users)
    assert counts[REJECTED] == 0
    assert counts["accepted"] == 1000
    assert info is not None
    assert info.input_done
    assert info.stopped is None


async def test_without_a_journal_the_report_counts_every_input(
    client: CampaignClient, mocked: ScriptedExchange
) -> None:
    service = Service(good=2)
    mocked.post(SEND, callback=service.handle, repeat=True)
    report = await client.send_bulk(7, people(1000), chunk_size=50, concurrency=4)
    counts: dict[str, Any] = report.counts
    assert isinstance(report.fatal, NotFoundError)
    assert (report.total, counts["accepted"], counts["rejected"]) == (1000, 100, 900)
    assert all(isinstance(chunk.error, NotFoundError) for chunk in report.rejected)


WHOLE_REQUEST = "The poll id is required either in the URL or in the body."


@pytest.mark.parametrize(
    "detail", [WHOLE_REQUEST, "El id de la encuesta es obligatorio en la URL o en el cuerpo."]
)
async def test_a_400_refusing_the_whole_request_ends_the_run_like_a_404(
    client: CampaignClient, mocked: ScriptedExchange, new_ledger: NewLedger, detail: str
) -> None:
    service = Service(good=2, refusal=Reply(status=400, payload={"detail": detail}))
    mocked.post(SEND, callback=service.handle, repeat=True)
    async with new_ledger() as ledger:
        report = await client.send_bulk(
            7, people(1000), chunk_size=50, concurrency=4, journal=ledger
        )
        rejected = [r async for r in ledger.records(RUN, [REJECTED])]
    assert isinstance(report.fatal, BadRequestError)
    assert (report.total, report.counts["accepted"], report.counts["rejected"]) == (1000, 100, 900)
    # Chunks after the first refusal were not sent: at most the ones under way.
    assert service.answered <= 2 + 4
    assert len(rejected) == report.counts["rejected"]
    assert all(r.detail and r.detail.startswith("BadRequestError") for r in rejected)


class PollDeleted:
    """The sandbox's poll deleted once ``kept`` requests have found it (every
    later send answered 404, as the real service does), until :meth:`restore`."""

    def __init__(self, sb: Sandbox, monkeypatch: pytest.MonkeyPatch, *, kept: int) -> None:
        self.company = sb.world.default
        self.poll = next(iter(self.company.polls))
        self.kept = kept
        self._deleted: Any = None
        self._lookup = _app._poll_id
        monkeypatch.setattr(_app, "_poll_id", self.poll_id)

    def poll_id(self, company: Any, raw: object) -> int:
        if self.kept == 0 and self._deleted is None:
            self._deleted = self.company.polls.pop(self.poll)
        self.kept -= 1
        return self._lookup(company, raw)

    def restore(self) -> None:
        self.company.polls[self.poll] = self._deleted
        self._deleted = None
        self.kept = -1


async def test_a_poll_deleted_after_the_first_chunk_rejects_every_remaining_input_user(
    sb: Sandbox, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    valid = [User(cellphone=f"55{i:08d}", country_code="+52") for i in range(1000)]
    # Invalid inputs and repeated people after the fatal answer are counted as usual.
    users: list[Any] = [*valid, *[{"country_code": "+52", "cellphone": "12x"}] * 3, *valid[-5:]]
    deleted = PollDeleted(sb, monkeypatch, kept=1)
    journal = tmp_path / "run.db"
    async with sb.client() as client:
        report = await client.send_bulk(
            deleted.poll, users, chunk_size=200, concurrency=1, journal=journal, run="gone"
        )
        async with SqliteLedger(journal) as ledger:
            counts = await ledger.counts("gone")
            rejected = [r async for r in ledger.records("gone", [REJECTED])]
            read_back = await ledger.report("gone")
        received = await phone_counts(sb)
        assert isinstance(report.fatal, NotFoundError)
        assert report.total == read_back.total == len(users)
        assert (len(report.invalid), len(report.duplicates)) == (3, 5)
        assert report.counts["accepted"] == len(received) == 200
        assert report.counts["rejected"] == counts[REJECTED] == len(rejected) == 800
        assert read_back.counts == report.counts
        assert {r.phone for r in rejected} == {
            u.country_code + u.cellphone for u in report.users_for("rejected")
        }
        assert all(r.detail and r.detail.startswith("NotFoundError") for r in rejected)
        assert await sends_seen(sb) == 2  # the first chunk, and the one refused

        # The poll is back: the rerun sends exactly the rejected, nobody twice.
        deleted.restore()
        again = await client.send_bulk(
            deleted.poll,
            users,
            chunk_size=200,
            concurrency=1,
            journal=journal,
            run="gone",
            retry_rejected=True,
        )
        async with SqliteLedger(journal) as ledger:
            counts = await ledger.counts("gone")
    received = await phone_counts(sb)
    assert again.fatal is None
    assert set(received) == {u.country_code + u.cellphone for u in valid}
    assert set(received.values()) == {1}
    assert (counts["accepted"], counts[REJECTED]) == (1000, 0)


async def sends_seen(sb: Sandbox) -> int:
    return int((await sb.admin("GET", "/faults"))["requests"].get("send_campaign", 0))


async def phone_counts(sb: Sandbox) -> dict[str, int]:
    counts: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    return counts
