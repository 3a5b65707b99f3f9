"""The fault matrix: every public call x every fault the sandbox injects x
once / persistent, each cell checked against ONE table of documented outcomes.

The table (``EXPECTED``) is data: one row of outcomes per behaviour class
(reads, sends, the tracker, bulk sends), each call mapped to its class. Each
cell runs against a fresh sandbox and asserts the outcome (recovered, or the
exact typed error), how many requests the sandbox saw on the route, and for
sends how many times the sandbox received the users (never more than once).

``python tests/test_fault_matrix.py`` prints the table as documented;
``--write`` updates ``docs/reliability.md``, which a test keeps in step.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import typing
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers.fakes import FakeTime

from campaignkit import CampaignClient, CampaignKitError, RetryPolicy, User
from campaignkit.errors import AmbiguousSendError, ResponseError

pytestmark = pytest.mark.timeout(30)

DOC = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"
START, END = "<!-- fault-matrix:start -->", "<!-- fault-matrix:end -->"

MAX_RETRIES = 2
TIMEOUT = 5.0  # per request; latency cells use LATENCY_TIMEOUT
LATENCY_TIMEOUT = 0.2
LATENCY = 0.45  # > LATENCY_TIMEOUT: every latency fault is a timeout
RETRY_AFTER = 1.0
TRACK_INTERVAL = 0.25  # poll_interval = max_interval: no jitter, exact poll counts
TRACK_TIMEOUT = 1.0  # fake seconds (the injected clock): polls at 0, .25, .5, .75, 1

# ---- the table ---------------------------------------------------------------

# Columns: public call -> (behaviour class, sandbox route, requests without a fault).
CALLS: dict[str, tuple[str, str, int]] = {
    "send_campaign": ("send", "send_campaign", 1),
    "deploy_legacy": ("send", "deploy_legacy", 1),
    "update_session": ("send", "update_session", 1),
    "get_campaign_status": ("read", "campaign_status", 1),
    "list_sessions": ("read", "list_sessions", 1),
    "iter_sessions": ("read", "list_sessions", 2),  # 5 sessions, pages of 3
    "get_session_history": ("read", "session_history", 1),
    "list_polls": ("read", "list_polls", 1),
    "list_agents": ("read", "list_agents", 1),
    "track": ("track", "campaign_status", 1),
    "send_bulk": ("bulk", "send_campaign", 1),  # one chunk
}

# Rows: fault name -> sandbox rule (route and count are added per cell).
FAULTS: dict[str, dict[str, Any]] = {
    "429 + Retry-After": {"kind": "429", "retry_after": RETRY_AFTER},
    "429": {"kind": "429"},
    "500": {"kind": "500"},
    "502": {"kind": "502"},
    "503": {"kind": "503"},
    "504": {"kind": "504"},
    "latency > timeout": {"kind": "latency", "seconds": LATENCY},
    "closed before answer": {"kind": "drop"},
    "closed mid-body": {"kind": "drop_mid_body"},
    "HTML page, 502": {"kind": "html"},
    "HTML page, 200": {"kind": "html", "status": 200},
    "truncated JSON": {"kind": "truncated"},
    "empty body": {"kind": "empty"},
    "JSON as text/plain": {"kind": "wrong_content_type"},
    "JSON of wrong type": {"kind": "wrong_type"},
    "302 to another host": {"kind": "redirect"},
}
MODES = ("once", "persistent")  # count=1, or every request

# Outcome notation: "<outcome> <requests>[ rx<n>]". <outcome> is "ok" (or for
# send_bulk the chunk's outcome) or the exact error class; <requests> is what
# the sandbox saw on the route: "+k" = k more than without a fault, a bare
# number is absolute. rx<n>: times the sandbox received the users (sends).
# Sends are faulted *after* the sandbox processed them (when="after"), except
# 429, which by its meaning is answered without processing.
P = MAX_RETRIES + 1
TRACK_POLLS = int(TRACK_TIMEOUT / TRACK_INTERVAL) + 1

# Failures of the transport, or answers that are not JSON: the tracker
# retries them all until its timeout.
UNREAD = (
    "500",
    "502",
    "503",
    "504",
    "latency > timeout",
    "closed before answer",
    "closed mid-body",
    "HTML page, 502",
    "HTML page, 200",
    "truncated JSON",
    "empty body",
)
# Faults after which a send may have reached the service: never resent.
SENDS_USERS = ("send_campaign", "deploy_legacy")
MAY_HAVE_ARRIVED = (*UNREAD, "JSON of wrong type", "302 to another host")

EXPECTED: dict[str, dict[str, tuple[str, str]]] = {
    "read": {
        "429 + Retry-After": ("ok +1", f"RateLimitError {P}"),
        "429": ("ok +1", f"RateLimitError {P}"),
        "500": ("ok +1", f"ServerError {P}"),
        "502": ("ok +1", f"ServerError {P}"),
        "503": ("ok +1", f"ServerError {P}"),
        "504": ("ok +1", f"ServerError {P}"),
        "latency > timeout": ("ok +1", f"TimeoutError {P}"),
        "closed before answer": ("ok +1", f"ConnectionError {P}"),
        "closed mid-body": ("ok +1", f"ConnectionError {P}"),
        "HTML page, 502": ("ok +1", f"ServerError {P}"),
        "HTML page, 200": ("ResponseError 1", "ResponseError 1"),
        "truncated JSON": ("ResponseError 1", "ResponseError 1"),
        "empty body": ("ResponseError 1", "ResponseError 1"),
        "JSON as text/plain": ("ok +0", "ok +0"),
        "JSON of wrong type": ("ResponseError 1", "ResponseError 1"),
        "302 to another host": ("RedirectError 1", "RedirectError 1"),
    },
    "send": {
        "429 + Retry-After": ("ok +1 rx1", f"RateLimitError {P} rx0"),
        "429": ("ok +1 rx1", f"RateLimitError {P} rx0"),
        **{
            fault: ("AmbiguousSendError 1 rx1", "AmbiguousSendError 1 rx1")
            for fault in MAY_HAVE_ARRIVED
        },
        "JSON as text/plain": ("ok +0 rx1", "ok +0 rx1"),
        # The service answered: not ambiguous, but the acknowledgement is unusable.
        "JSON of wrong type": ("ResponseError 1 rx1", "ResponseError 1 rx1"),
    },
    # The tracker retries every transient failure (and any answer that is not
    # JSON) until its own timeout; a Retry-After of 1 s uses the whole second.
    "track": {
        "429 + Retry-After": ("ok +1", "TimeoutError 2"),
        **{fault: ("ok +1", f"TimeoutError {TRACK_POLLS}") for fault in ("429", *UNREAD)},
        "JSON as text/plain": ("ok +0", "ok +0"),
        "JSON of wrong type": ("ResponseError 1", "ResponseError 1"),
        "302 to another host": ("RedirectError 1", "RedirectError 1"),
    },
    "bulk": {
        "429 + Retry-After": ("accepted +1 rx1", f"rejected {P} rx0"),
        "429": ("accepted +1 rx1", f"rejected {P} rx0"),
        **{fault: ("ambiguous 1 rx1", "ambiguous 1 rx1") for fault in MAY_HAVE_ARRIVED},
        "JSON as text/plain": ("accepted +0 rx1", "accepted +0 rx1"),
    },
}


@attrs.frozen
class Outcome:
    outcome: str
    requests: int
    received: int | None = None

    def __str__(self) -> str:
        rx = "" if self.received is None else f" rx{self.received}"
        return f"{self.outcome} {self.requests}{rx}"


def expected(call: str, fault: str, mode: str) -> Outcome:
    """The documented outcome of one cell, with absolute request counts."""
    behaviour, _, baseline = CALLS[call]
    text = EXPECTED[behaviour][fault][MODES.index(mode)]
    outcome, requests, *rest = text.split()
    count = baseline + int(requests) if requests.startswith("+") else int(requests)
    received = int(rest[0].removeprefix("rx")) if rest else None
    return Outcome(outcome, count, received)


def cells() -> Iterator[tuple[str, str, str]]:
    for fault in FAULTS:
        for mode in MODES:
            for call in CALLS:
                yield call, fault, mode


def render(cell: Callable[[str, str, str], object] = expected) -> str:
    """The matrix as a Markdown table: a row per fault and mode, a column per call."""
    lines = [
        "| fault | mode | " + " | ".join(f"`{call}`" for call in CALLS) + " |",
        "|---|---|" + "---|" * len(CALLS),
    ]
    for fault in FAULTS:
        for mode in MODES:
            row = " | ".join(str(cell(call, fault, mode)) for call in CALLS)
            lines.append(f"| {fault} | {mode} | {row} |")
    return "\n".join(lines)


# ---- running one cell ----------------------------------------------------------


USERS = [User(cellphone=f"55100{n}1234", country_code="+52") for n in range(3)]
PHONES = [user.country_code + user.cellphone for user in USERS]


def _rule(call: str, fault: str, mode: str) -> dict[str, Any]:
    behaviour, route, _ = CALLS[call]
    rule = {**FAULTS[fault], "route": route}
    if behaviour in ("send", "bulk"):
        rule["when"] = "before" if rule["kind"] == "429" else "after"
    if mode == "once":
        rule["count"] = 1
    return rule


async def _setup(call: str, sb: Any, client: CampaignClient) -> dict[str, Any]:
    """What the call needs, made before any fault is set."""
    context: dict[str, Any] = {}
    if call in ("get_campaign_status", "track"):
        ack = await client.send_campaign(1001, USERS[:1])
        await sb.set_clock(advance=60)  # DONE at the first successful poll
        context["ack"] = ack
    if call in ("update_session", "get_session_history"):
        page = await client.list_sessions(1001)
        context["session"] = page.results[0].id
    return context


async def _invoke(call: str, client: CampaignClient, ctx: dict[str, Any], fake: FakeTime) -> str:
    """Run the call; the outcome word of the notation (errors propagate)."""
    if call == "send_campaign":
        ack = await client.send_campaign(1001, USERS)
        assert ack.launch_request_id
    elif call == "deploy_legacy":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            legacy = await client.deploy_legacy(1001, USERS)
        assert len(legacy.conversations_id) == len(USERS)
    elif call == "update_session":
        update = await client.update_session(ctx["session"], {"plan": "gold"})
        assert update.session_id == ctx["session"]
    elif call == "get_campaign_status":
        status = await client.get_campaign_status(ctx["ack"].launch_request_id)
        assert status.launch_request_id == ctx["ack"].launch_request_id
        assert status.status.value == "DONE"
    elif call == "list_sessions":
        assert len((await client.list_sessions(1001)).results) == 5
    elif call == "iter_sessions":
        ids = [session.id async for session in client.iter_sessions(1001, page_size=3)]
        assert len(set(ids)) == 5
    elif call == "get_session_history":
        assert await client.get_session_history(ctx["session"])
    elif call == "list_polls":
        assert [poll.id for poll in await client.list_polls()] == [1001, 1002, 1003]
    elif call == "list_agents":
        assert len(await client.list_agents()) == 3
    elif call == "track":
        tracker = client.track(
            ctx["ack"],
            poll_interval=TRACK_INTERVAL,
            max_interval=TRACK_INTERVAL,
            timeout=TRACK_TIMEOUT,
        )
        changes = [change async for change in tracker]
        assert changes
        assert tracker.state is not None
        assert tracker.state.value == "DONE"
    elif call == "send_bulk":
        report = await client.send_bulk(1001, USERS, concurrency=1)
        chunks = report.accepted + report.rejected + report.ambiguous
        assert len(chunks) == 1
        chunk = chunks[0]
        if chunk.outcome != "accepted":
            assert [u.cellphone for u in report.users_for(chunk.outcome)] == [
                u.cellphone for u in USERS
            ]
        return chunk.outcome
    else:  # pragma: no cover - a call missing here is a bug of the table
        raise AssertionError(call)
    return "ok"


async def _received(call: str, sb: Any, ctx: dict[str, Any]) -> int | None:
    """How many times the sandbox took the users (sends) or the update."""
    if call == "update_session":
        record = sb.world.session(ctx["session"])
        thanked: int = sum(
            entry.get("message", {}).get("text", "").startswith("Thanks, noted")
            for entry in record.history
        )
        return thanked
    if CALLS[call][0] not in ("send", "bulk"):
        return None
    counts: dict[str, int] = (await sb.snapshot())["companies"][0]["phone_counts"]
    got = {counts.get(phone, 0) for phone in PHONES}
    assert len(got) == 1, f"users received unevenly: {counts}"  # one request, all or none
    return got.pop()


async def run_cell(call: str, fault: str, mode: str) -> tuple[Outcome, BaseException | None]:
    from campaignkit.sandbox import Sandbox

    fake = FakeTime()
    timeout = LATENCY_TIMEOUT if FAULTS[fault]["kind"] == "latency" else TIMEOUT
    retry = RetryPolicy(max_retries=MAX_RETRIES, backoff_initial=0.01, backoff_max=0.05)
    async with (
        Sandbox(speed=50, legacy_enabled=True) as sb,
        fake.install(sb.client(timeout=timeout, retry=retry)) as client,
    ):
        ctx = await _setup(call, sb, client)
        route = CALLS[call][1]
        before = (await sb.admin("GET", "/faults"))["requests"].get(route, 0)
        await sb.set_faults(_rule(call, fault, mode))
        error: BaseException | None = None
        try:
            word = await _invoke(call, client, ctx, fake)
        except CampaignKitError as exc:
            error = exc
            word = type(exc).__name__
        state = await sb.admin("GET", "/faults")
        requests = state["requests"].get(route, 0) - before
        fired = state["faults"][0]["fired"]
        assert fired == (1 if mode == "once" else requests), state
        received = await _received(call, sb, ctx)
    if fault.startswith("429 + ") and call != "track":
        retries = 1 if mode == "once" else MAX_RETRIES
        assert fake.sleeps == [RETRY_AFTER] * retries  # Retry-After honoured
    return Outcome(word, requests, received), error


# ---- the tests -----------------------------------------------------------------

OBSERVED: dict[tuple[str, str, str], str] = {}


@pytest.fixture(scope="module", autouse=True)
def print_matrix(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the module, write the observed matrix to the terminal."""
    yield
    if not OBSERVED:
        return
    reporter = request.config.pluginmanager.getplugin("terminalreporter")

    def cell(call: str, fault: str, mode: str) -> str:
        seen = OBSERVED.get((call, fault, mode))
        want = str(expected(call, fault, mode))
        if seen is None:
            return "(not run)"
        return seen if seen == want else f"**{seen}** (documented: {want})"

    text = "\nFault matrix (observed; see docs/reliability.md)\n" + render(cell) + "\n"
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        if reporter is not None:
            reporter.write_line(text)
        else:  # pragma: no cover - without the terminal plugin
            sys.stdout.write(text)


@pytest.fixture
async def _no_leftover_tasks() -> AsyncIterator[None]:
    yield
    current = asyncio.current_task()
    await asyncio.sleep(0)
    left = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
    assert not left, left


@pytest.mark.usefixtures("_no_leftover_tasks")
@pytest.mark.parametrize(("call", "fault", "mode"), list(cells()))
async def test_cell(call: str, fault: str, mode: str) -> None:
    want = expected(call, fault, mode)
    got, error = await run_cell(call, fault, mode)
    OBSERVED[(call, fault, mode)] = str(got)
    assert got == want, f"{call} x {fault} x {mode}: got {got}, documented {want} ({error!r})"
    if isinstance(error, AmbiguousSendError | ResponseError) and call in SENDS_USERS:
        assert [u.cellphone for u in error.users] == [u.cellphone for u in USERS]
    if got.received is not None:
        assert got.received <= 1  # nobody messaged twice, whatever the table says


def test_table_covers_every_call_and_fault() -> None:
    from campaignkit.sandbox._faults import Kind

    kinds = {rule["kind"] for rule in FAULTS.values()}
    assert kinds == set(typing.get_args(Kind))
    for behaviour, row in EXPECTED.items():
        assert set(row) == set(FAULTS), behaviour
    assert {behaviour for behaviour, _, _ in CALLS.values()} == set(EXPECTED)
    assert len(list(cells())) == len(CALLS) * len(FAULTS) * len(MODES)


def test_docs_hold_the_current_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert f"{START}\n{render()}\n{END}" in text, (
        "docs/reliability.md is out of date: run `python tests/test_fault_matrix.py --write`"
    )


def write_docs() -> None:
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    DOC.write_text(f"{head}{START}\n{render()}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write_docs()
    else:
        print(render())
