"""The funnel and the answers of a poll, read from the service's own records:
its sessions (the paginated listing) and each session's history. Nothing of
campaignkit's is needed, so it works for campaigns any tool sent.

What a history shows, and so what is counted: a message's ``sender`` is the
user (``USER``) or the service's side (``AI``, or any other sender: the
company, an agent); the service's messages carry ``delivered_at`` and
``read_at`` when the network reported them. A session is **delivered** when
one of the service's messages has a delivery time, **read** when one has a
read time, **replied** when the user wrote; a reply also counts as read and
delivered, a read as delivered (the network does not always report the
earlier step). Each user message answers the last message of the service's
side before it: its *question*, grouped by the text as sent (a question
that names the user is one question per name).
"""

from __future__ import annotations

import asyncio
import bisect
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import attrs

from .._input.validation import Problems, given, path_segment, raise_problems, unix_seconds
from ..models import HistoryEntry, SessionMeta

if TYPE_CHECKING:
    from ..client import CampaignClient


DEFAULT_CONCURRENCY = 8
"""History calls in flight at once."""

CHART_POINTS = 256
"""At most this many points of :attr:`PollAnalysis.over_time` (evenly spaced
when the sessions moved at more distinct times)."""

USER = "USER"


def normalise_answer(text: str) -> str:
    """The option an answer counts under: its words, compatibility-normalised
    (NFKC: full-width letters, ligatures), case-folded, separated by one
    space, none around (``"  Sí\\n"`` and ``"SÍ"`` are ``"sí"``)."""
    # NFKC again after casefold: folding can produce text NFKC would change.
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())


@attrs.frozen
class AnswerOption:
    """Answers that read the same once normalised (:func:`normalise_answer`);
    ``texts``: how they were written, ``(raw text, answers)``, most frequent first."""

    option: str
    answers: int
    texts: tuple[tuple[str, int], ...]

    def to_json(self) -> dict[str, Any]:
        return {"option": self.option, "answers": self.answers, "texts": dict(self.texts)}


@attrs.frozen
class QuestionAnswers:
    """The user messages that answered ``question`` (the text the service's
    side sent last before them; None: the user wrote first): ``answers``
    counts messages, ``sessions`` the sessions with at least one;
    ``options`` most answered first."""

    question: str | None
    answers: int
    sessions: int
    options: tuple[AnswerOption, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answers": self.answers,
            "sessions": self.sessions,
            "options": [option.to_json() for option in self.options],
        }


@attrs.frozen
class FunnelPoint:
    """The funnel at ``at``: sessions started by then, and those that had
    been delivered, read, replied (each also counted by the steps before)."""

    at: datetime
    sessions: int
    delivered: int
    read: int
    replied: int

    def to_json(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "at": self.at.isoformat()}


@attrs.frozen
class PollAnalysis:
    """A poll's sessions between ``since`` and ``until`` (None: the service's
    default range, the current year), as their histories tell them: the
    funnel ``sessions`` → ``delivered`` → ``read`` → ``replied`` (see the
    module's words), the answers by question (in the order conversations
    answer them: by the earliest place a question holds among a session's
    answered ones, then the most answered), and the funnel over time for a
    chart."""

    poll_id: str
    since: datetime | None
    until: datetime | None
    sessions: int
    delivered: int
    read: int
    replied: int
    questions: tuple[QuestionAnswers, ...]
    over_time: tuple[FunnelPoint, ...] = ()

    @property
    def steps(self) -> tuple[tuple[str, int], ...]:
        """``(step, sessions)`` from sessions to replied, in order."""
        return (
            ("sessions", self.sessions),
            ("delivered", self.delivered),
            ("read", self.read),
            ("replied", self.replied),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "poll_id": self.poll_id,
            "since": None if self.since is None else self.since.isoformat(),
            "until": None if self.until is None else self.until.isoformat(),
            "funnel": dict(self.steps),
            "questions": [question.to_json() for question in self.questions],
            "over_time": [point.to_json() for point in self.over_time],
        }


@attrs.frozen
class AnalysisProgress:
    """How far :func:`analyze_poll` is: sessions ``listed`` so far (all of
    them once ``listing_done``), histories ``analysed``."""

    listed: int
    analysed: int
    listing_done: bool

    @property
    def total(self) -> int | None:
        """The sessions to analyse, once the listing is done."""
        return self.listed if self.listing_done else None


@attrs.frozen
class SessionReading:
    """What one history says: when the session reached each step (None:
    not reached) and its answers as ``(question, raw text)`` in order."""

    started: datetime
    delivered: datetime | None
    read: datetime | None
    replied: datetime | None
    answers: tuple[tuple[str | None, str], ...]


def read_history(started: datetime, history: Sequence[HistoryEntry]) -> SessionReading:
    """The reading of a session that ``started`` (its listing's
    ``created_at``) from its ``history``, in time order (ties: as listed)."""
    delivered: list[datetime] = []
    read: list[datetime] = []
    replies: list[datetime] = []
    answers: list[tuple[str | None, str]] = []
    question: str | None = None
    for entry in sorted(history, key=lambda entry: entry.message.created_at):
        message = entry.message
        if message.sender.upper() == USER:
            replies.append(message.created_at)
            answers.append((question, message.text))
            continue
        question = message.text
        if message.delivered_at is not None:
            delivered.append(message.delivered_at)
        if message.read_at is not None:
            read.append(message.read_at)
    # A later step implies the earlier ones, and none comes before the start.
    replied = min(replies, default=None)
    read_at = _first(read, replied)
    delivered_at = _first(delivered, read_at)
    return SessionReading(
        started,
        None if delivered_at is None else max(delivered_at, started),
        None if read_at is None else max(read_at, started),
        None if replied is None else max(replied, started),
        tuple(answers),
    )


def _first(times: Iterable[datetime], later_step: datetime | None) -> datetime | None:
    known = [*times, *([] if later_step is None else [later_step])]
    return min(known, default=None)


@attrs.define
class _Question:
    answers: Counter[tuple[str, str]] = attrs.Factory(Counter)
    """By (option, raw text)."""
    sessions: int = 0
    position: int = 0
    """Its earliest place among a session's questions."""


class Tally:
    """Session readings added up into a :class:`PollAnalysis`; order-free, so
    histories are added as they arrive."""

    def __init__(self) -> None:
        self.sessions = 0
        self._steps: tuple[list[datetime], ...] = ([], [], [], [])
        self._questions: dict[str | None, _Question] = {}

    def add(self, reading: SessionReading) -> None:
        self.sessions += 1
        times = (reading.started, reading.delivered, reading.read, reading.replied)
        for step, at in zip(self._steps, times, strict=True):
            if at is not None:
                step.append(at)
        asked: list[str | None] = []
        for question, text in reading.answers:
            tally = self._questions.get(question)
            if tally is None:
                tally = self._questions[question] = _Question(position=len(asked))
            tally.answers[normalise_answer(text), text] += 1
            if question not in asked:
                tally.position = min(tally.position, len(asked))
                tally.sessions += 1
                asked.append(question)

    def result(self, poll_id: str, since: datetime | None, until: datetime | None) -> PollAnalysis:
        _, delivered, read, replied = self._steps
        questions = sorted(
            (_answers(question, tally) for question, tally in self._questions.items()),
            key=lambda answers: (
                self._questions[answers.question].position,
                -answers.sessions,
                answers.question or "",
            ),
        )
        return PollAnalysis(
            poll_id,
            since,
            until,
            self.sessions,
            len(delivered),
            len(read),
            len(replied),
            tuple(questions),
            _over_time(self._steps),
        )


def _most_first(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _answers(question: str | None, tally: _Question) -> QuestionAnswers:
    by_option: dict[str, list[tuple[str, int]]] = {}
    for (option, text), count in tally.answers.items():
        by_option.setdefault(option, []).append((text, count))
    options = sorted(
        (
            AnswerOption(option, sum(n for _, n in texts), tuple(sorted(texts, key=_most_first)))
            for option, texts in by_option.items()
        ),
        key=lambda option: (-option.answers, option.option),
    )
    return QuestionAnswers(question, tally.answers.total(), tally.sessions, tuple(options))


def _over_time(steps: tuple[list[datetime], ...]) -> tuple[FunnelPoint, ...]:
    """The funnel at each time a session moved (at most :data:`CHART_POINTS`)."""
    for times in steps:
        times.sort()
    moments = sorted({at for times in steps for at in times})
    if len(moments) > CHART_POINTS:
        first, span = moments[0], moments[-1] - moments[0]
        moments = [first + span * i / (CHART_POINTS - 1) for i in range(CHART_POINTS)]
    return tuple(
        FunnelPoint(at, *(bisect.bisect_right(times, at) for times in steps)) for at in moments
    )


def _concurrency_problems(concurrency: object, problems: Problems) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        problems.append(
            ("concurrency", f"must be a positive int, but {given(concurrency)} was given")
        )


def _moment(value: int | datetime | None, name: str, problems: Problems) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(unix_seconds(value, name, problems), UTC)


async def analyze_poll(
    client: CampaignClient,
    poll_id: str | int,
    *,
    since: int | datetime | None = None,
    until: int | datetime | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    page_size: int | None = None,
    on_progress: Callable[[AnalysisProgress], object] | None = None,
) -> PollAnalysis:
    """The funnel and the answers of ``poll_id`` from its sessions created
    between ``since`` and ``until`` (UNIX seconds or aware datetimes; neither:
    the service's default, the first 1000 sessions of the current year) and
    their histories, read ``concurrency`` at a time while the listing goes on
    (``page_size`` sessions a page). ``on_progress`` is called with an
    :class:`AnalysisProgress` after each history and once at the end (an
    error it raises stops the analysis). Bad arguments raise :class:`~campaignkit.ValidationError`
    naming each, before any call; the first call that fails stops the
    analysis with its error.
    """
    problems: Problems = []
    path_segment("poll_id", poll_id, problems)
    start = _moment(since, "since", problems)
    end = _moment(until, "until", problems)
    if start is not None and end is not None and end < start:
        problems.append(("until", "must not be before since"))
    _concurrency_problems(concurrency, problems)
    raise_problems(problems)
    tally = Tally()
    queue: asyncio.Queue[SessionMeta | None] = asyncio.Queue(maxsize=2 * concurrency)
    listed = 0
    listing_done = False

    async def list_sessions() -> None:
        nonlocal listed, listing_done
        sessions = client.iter_sessions(poll_id, start=start, end=end, page_size=page_size)
        async for session in sessions:
            listed += 1
            await queue.put(session)
        listing_done = True
        for _ in range(concurrency):
            await queue.put(None)

    async def read_histories() -> None:
        while (session := await queue.get()) is not None:
            history = await client.get_session_history(session.id)
            tally.add(read_history(session.created_at, history))
            if on_progress is not None:
                on_progress(AnalysisProgress(listed, tally.sessions, listing_done))

    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(list_sessions())
            for _ in range(concurrency):
                group.create_task(read_histories())
    except BaseExceptionGroup as failed:
        # The call's own error (what callers catch), not a group.
        first, *others = failed.exceptions
        for other in others:
            first.add_note(f"analyze_poll: failed at the same time: {other!r}")
        raise first from None
    if on_progress is not None:  # the end, also of a range without sessions
        on_progress(AnalysisProgress(listed, tally.sessions, True))
    return tally.result(str(poll_id), start, end)
