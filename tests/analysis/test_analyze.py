"""``analyze_poll`` against the sandbox, over real HTTP: the funnel and the
answers a survey's histories show, the range, the arguments refused."""

from __future__ import annotations

from datetime import UTC, datetime

import aiohttp
import pytest
from aiohttp import web
from helpers.servers import serving

from campaignkit import CampaignClient, ValidationError
from campaignkit.analysis import AnalysisProgress, AnswerOption, QuestionAnswers, analyze_poll
from campaignkit.sandbox import Sandbox

from .conftest import QUESTIONS, SEEDED, SEEDED_QUESTION, Survey

pytestmark = pytest.mark.timeout(30)


async def test_the_survey_counts_exactly(client: CampaignClient, survey: Survey) -> None:
    seen: list[AnalysisProgress] = []
    analysis = await analyze_poll(
        client, survey.poll_id, since=survey.sent_after, concurrency=2, on_progress=seen.append
    )
    assert analysis.steps == (("sessions", 5), ("delivered", 5), ("read", 3), ("replied", 3))
    assert analysis.questions == (
        QuestionAnswers(
            QUESTIONS[0],
            answers=3,
            sessions=3,
            options=(
                AnswerOption("yes", 2, (("YES ", 1), ("Yes", 1))),
                AnswerOption("maybe", 1, (("maybe", 1),)),
            ),
        ),
        QuestionAnswers(
            QUESTIONS[1],
            answers=2,
            sessions=2,
            options=(AnswerOption("no", 2, ((" no ", 1), ("No", 1))),),
        ),
    )
    assert analysis.since == datetime.fromtimestamp(survey.sent_after, UTC)
    assert analysis.until is None
    assert [p.analysed for p in seen] == [1, 2, 3, 4, 5, 5]
    assert seen[-1] == AnalysisProgress(listed=5, analysed=5, listing_done=True)
    assert seen[-1].total == 5
    # The chart's points: the funnel as it grew, ending where the counts end.
    last = analysis.over_time[-1]
    assert (last.sessions, last.delivered, last.read, last.replied) == (5, 5, 3, 3)
    assert [p.at for p in analysis.over_time] == sorted(p.at for p in analysis.over_time)
    assert all(p.sessions >= p.delivered >= p.read >= p.replied for p in analysis.over_time)


async def test_since_and_until_pick_the_sessions(
    sb: Sandbox, client: CampaignClient, survey: Survey
) -> None:
    everything = await analyze_poll(client, survey.poll_id)
    assert everything.sessions == SEEDED + 5
    assert everything.replied == SEEDED + 3  # each seeded session is answered "Yes"
    seeded = await analyze_poll(client, survey.poll_id, until=survey.sent_after - 1)
    assert seeded.steps == (("sessions", 5), ("delivered", 5), ("read", 5), ("replied", 5))
    [question] = seeded.questions
    assert (question.question, question.options) == (
        SEEDED_QUESTION,
        (AnswerOption("yes", SEEDED, (("Yes", SEEDED),)),),
    )
    later = await analyze_poll(client, survey.poll_id, since=int(await sb.now()) + 60)
    assert (later.sessions, later.questions, later.over_time) == (0, (), ())


async def test_page_size_and_one_history_at_a_time_give_the_same_answer(
    client: CampaignClient, survey: Survey
) -> None:
    wide = await analyze_poll(client, survey.poll_id, since=survey.sent_after)
    narrow = await analyze_poll(
        client, survey.poll_id, since=survey.sent_after, page_size=1, concurrency=1
    )
    assert narrow == wide


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"concurrency": True}, "concurrency"),
        ({"since": -1}, "since"),
        ({"until": datetime(2026, 1, 1)}, "until"),  # naive: refused, not guessed
        ({"since": 200, "until": 100}, "until"),
    ],
)
async def test_bad_arguments_are_named_before_any_call(
    client: CampaignClient, arguments: dict[str, object], named: str
) -> None:
    with client.raw_answers() as answers, pytest.raises(ValidationError) as raised:
        await analyze_poll(client, 1001, **arguments)  # type: ignore[arg-type]
    assert [path for path, _ in raised.value.problems] == [named]
    assert answers == []


async def test_a_bad_poll_id_is_named(client: CampaignClient) -> None:
    with pytest.raises(ValidationError) as raised:
        await analyze_poll(client, "..")
    assert [path for path, _ in raised.value.problems] == ["poll_id"]


class InFlight:
    """A reverse proxy in front of the sandbox that counts the history calls
    it forwards at once."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.now = self.most = self.calls = 0

    async def forward(self, request: web.Request) -> web.Response:
        counted = request.path.endswith("/history")
        if counted:
            self.calls += 1
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.request(
                    request.method, self.target + request.path_qs, headers=request.headers
                ) as answer,
            ):
                body = await answer.read()
                return web.Response(
                    body=body, status=answer.status, content_type=answer.content_type
                )
        finally:
            if counted:
                self.now -= 1


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_history_calls_in_flight_never_exceed_the_concurrency(
    sb: Sandbox, concurrency: int
) -> None:
    poll = 1001
    await sb.add_sessions(poll, 20)
    # Each history answered after 50 ms: calls overlap as far as they are let.
    await sb.set_faults({"kind": "latency", "route": "session_history", "seconds": 0.05})
    proxy = InFlight(sb.root_url)
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", proxy.forward)
    async with (
        serving(app) as url,
        CampaignClient(sb.api_key, base_url=sb.base_url.replace(sb.root_url, url)) as client,
    ):
        analysis = await analyze_poll(client, poll, concurrency=concurrency, page_size=7)
    assert analysis.sessions == proxy.calls == 20 + SEEDED
    assert proxy.most == concurrency
