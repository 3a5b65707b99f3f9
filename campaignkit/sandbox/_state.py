"""The sandbox's world: companies, polls, agents, launches and sessions.

Pure state and rules, no HTTP: the handlers in ``_app`` translate requests
into calls here. Deployment statuses are computed on read from
``(taken_at, outcome, now)``; nothing ticks per deployment.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any, NamedTuple

import attrs
import orjson

from ..models import DEPLOYMENT_SQUAD, DEPLOYMENT_SQUAD_PREFIX
from ..status import CampaignState
from ._clock import Clock
from ._config import SandboxConfig
from ._failures import PrefixFailures
from ._outcomes import DEFAULT_OUTCOME, OUTCOMES, SENT, VALIDATION_ERROR, outcome_for, wire
from ._sessions import US, PollSessions, SessionBlock, SessionRecord, message
from ._users import SessionKeys, UserIn, network_cellphone
from ._webhooks import WebhookTargets

__all__ = ["Company", "Deployment", "Launch", "NotRepliable", "World"]

JSON = dict[str, Any]
STATUS_SLICE = 5000


def _key_digits(drawn: str) -> str:
    """A key's digits, hashed from the draw: as drawn, they would share runs
    with the ids another sandbox of the same seed draws from the same stream,
    which the SDK's redaction of key fragments would then mask."""
    return hashlib.sha256(drawn.encode()).hexdigest()[:32]


def _network_cellphone(d: Deployment) -> str:
    return network_cellphone(d.country_code, d.cellphone)


class NotRepliable(ValueError):
    """A reply was asked for a deployment the user has not received."""


class Deployment(NamedTuple):
    """One user's deployment; a tuple so 100k of them stay small."""

    country_code: str
    cellphone: str
    keys: SessionKeys
    eta: int | None
    outcome: int
    line: str | None
    taken_at: float


@attrs.define(slots=True)
class Launch:
    """A launch request (one send) and its deployments."""

    id: str
    number: int
    poll_id: int
    batch_id: str
    endpoint: str
    business_scope_id: str
    received_at: float
    claimed_at: float
    done_at: float
    deployments: list[Deployment]

    def state(self, now: float) -> CampaignState:
        if now < self.claimed_at:
            return CampaignState.PENDING
        return CampaignState.CLAIMED if now < self.done_at else CampaignState.DONE

    def conversation_id(self, index: int) -> str:
        return f"{self.id}-{index}"

    def status_json(self, now: float, step: float) -> bytes:
        """The spec's campaign status record at sandbox time ``now``, as JSON.

        Serialised in slices so a 100k-deployment record never exists as
        100k dicts at once (peak memory stays near the body's own size).
        """
        head = orjson.dumps(
            {"launch_request_id": self.id, "status": self.state(now).value, "poll_id": self.poll_id}
        )
        if now < self.claimed_at:
            return head[:-1] + b',"deployments":[]}'
        slices = (
            orjson.dumps(self._deployments_json(start, now, step))[1:-1]  # drop the [ ]
            for start in range(0, len(self.deployments), STATUS_SLICE)
        )
        return b"".join((head[:-1], b',"deployments":[', b",".join(slices), b"]}"))

    def _deployments_json(self, start: int, now: float, step: float) -> list[JSON]:
        # Hot path: locals and a tuple index per deployment, nothing stored.
        outcomes, scope, prefix = OUTCOMES, self.business_scope_id, self.id
        network = _network_cellphone
        service = f"svc-{self.number}-"
        return [
            {
                "conversation_id": f"{prefix}-{i}",
                "service_id": f"{service}{i}",
                "cellphone": d.cellphone if d.country_code != "+52" else network(d),
                "business_scope_id": scope,
                "username": None,
                "status": outcomes[d.outcome].status_at((now - d.taken_at) / step),
            }
            for i, d in enumerate(self.deployments[start : start + STATUS_SLICE], start)
        ]

    def find(self, country_code: str | None, cellphone: str) -> int | None:
        for index, d in enumerate(self.deployments):
            if d.cellphone == cellphone and country_code in (None, d.country_code):
                return index
        return None

    def snapshot(self, now: float, step: float, users: bool) -> JSON:
        data: JSON = {
            "launch_request_id": self.id,
            "endpoint": self.endpoint,
            "poll_id": self.poll_id,
            "batch_id": self.batch_id,
            "status": self.state(now).value,
            "received_at": self.received_at,
            "claimed_at": self.claimed_at,
            "done_at": self.done_at,
            "user_count": len(self.deployments),
        }
        if users:
            data["users"] = [
                {
                    "conversation_id": self.conversation_id(i),
                    "country_code": d.country_code,
                    "cellphone": d.cellphone,
                    "user_session_keys": [{"key": k, "value": v} for k, v in d.keys],
                    "deployment_eta": d.eta,
                    "line": d.line,
                    "taken_at": d.taken_at,
                    "final_status": wire(OUTCOMES[d.outcome].final),
                    "history": [
                        {"status": status, "at": at}
                        for status, at in OUTCOMES[d.outcome].history(d.taken_at, step, now)
                    ],
                }
                for i, d in enumerate(self.deployments)
            ]
        return data


@attrs.frozen
class Agent:
    id: int
    first_name: str
    last_name: str
    email: str
    tags: tuple[tuple[int, str], ...]
    active: bool

    def to_json(self) -> JSON:
        return {
            "id": self.id,
            "first_name": self.first_name,
            "last_name": self.last_name,
            "email": self.email,
            "tags": [{"id": tag_id, "name": name} for tag_id, name in self.tags],
        }


@attrs.define
class Company:
    """A customer account: its key, data and what it sent."""

    id: str
    number: int
    api_key: str
    name: str
    polls: dict[int, str]
    agents: list[Agent]
    lines: tuple[str, ...]
    webhooks: WebhookTargets = attrs.Factory(WebhookTargets)
    poll_webhooks: dict[int, WebhookTargets] = attrs.Factory(dict)
    # poll id -> the questions its flow asks in turn (default: one question).
    flows: dict[int, tuple[str, ...]] = attrs.Factory(dict)
    launches: dict[str, Launch] = attrs.Factory(dict)
    sessions: dict[int, PollSessions] = attrs.Factory(dict)
    # (launch id, deployment index) -> session id, so a second reply continues it.
    reply_sessions: dict[tuple[str, int], str] = attrs.Factory(dict)
    webhook_log: list[JSON] = attrs.Factory(list)

    def targets(self, poll_id: int) -> WebhookTargets:
        """Where the calls of a poll's flows go: the poll's own, else the company's."""
        return self.poll_webhooks.get(poll_id, self.webhooks)

    def questions(self, poll_id: int) -> tuple[str, ...]:
        return self.flows.get(poll_id) or (f"{self.polls[poll_id]}: can we ask you a question?",)

    @property
    def business_scope_id(self) -> str:
        return f"bs-{self.number}"

    def phone_counts(self) -> Counter[str]:
        """How many times each phone (country code + cellphone) was sent to."""
        return Counter(
            d.country_code + d.cellphone for lr in self.launches.values() for d in lr.deployments
        )

    def snapshot(self, now: float, step: float, users: bool, launch: str | None) -> JSON:
        launches = [lr for lr in self.launches.values() if launch in (None, lr.id)]
        data: JSON = {
            "company_id": self.id,
            "name": self.name,
            "api_key": self.api_key,
            "webhook": self.webhooks.to_json(),
            "poll_webhooks": {str(p): t.to_json() for p, t in self.poll_webhooks.items()},
            "flows": {str(p): list(q) for p, q in self.flows.items()},
            "lines": list(self.lines),
            "polls": [{"id": pid, "name": name} for pid, name in self.polls.items()],
            "received_users": sum(len(lr.deployments) for lr in self.launches.values()),
            "launches": [lr.snapshot(now, step, users) for lr in launches],
            "sessions": {str(pid): ps.count() for pid, ps in self.sessions.items()},
            "webhooks": self.webhook_log,
        }
        if users:
            data["phone_counts"] = dict(self.phone_counts())
        return data


_FIRST = ("Ana", "Bruno", "Carla", "Diego", "Elena")
_LAST = ("Gómez", "Silva", "Rojas", "Pérez", "Mora")
_POLLS = ("Customer satisfaction", "Appointment reminder", "Payment follow-up")


class World:
    """Every company and the rules that change them."""

    def __init__(self, config: SandboxConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self._rng = random.Random(config.seed)
        self.companies: dict[str, Company] = {}
        self._by_key: dict[str, Company] = {}
        self._blocks: dict[int, SessionBlock] = {}
        self._records: dict[str, SessionRecord] = {}
        self._launch_count = 0
        self.failures = PrefixFailures(config.seed)
        self.default = self.add_company("Sandbox Inc.")

    # ---- ids -------------------------------------------------------------
    def _hex(self, bits: int = 96) -> str:
        return f"{self._rng.getrandbits(bits):0{bits // 4}x}"

    def event_id(self) -> str:
        """An account event's id: 24 hex digits, as in the published sample."""
        return self._hex()

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    # ---- companies -------------------------------------------------------
    def add_company(self, name: str | None = None, lines: tuple[str, ...] | None = None) -> Company:
        """A new company with polls, agents (one inactive), lines and sessions."""
        number = len(self.companies) + 1
        base = number * 1000
        sales, support = (base + 1, "Sales"), (base + 2, "Support")
        tags = ((sales, support), (sales,))
        agents = [
            Agent(
                id=base + k,
                first_name=_FIRST[k % len(_FIRST)],
                last_name=_LAST[k % len(_LAST)],
                email=f"agent{k}@company{number}.example",
                tags=tags[k % 2],
                active=k != 3,
            )
            for k in range(4)
        ]
        company = Company(
            id=f"company-{number}",
            number=number,
            api_key=f"sk_test_{_key_digits(self._hex(128))}",
            name=name or f"Company {number}",
            polls={base + k + 1: title for k, title in enumerate(_POLLS)},
            agents=agents,
            lines=lines or (f"1555000{number:02d}01", f"1555000{number:02d}02"),
        )
        self.companies[company.id] = company
        self._by_key[company.api_key] = company
        now_us = int(self.clock.now() * US)
        for poll_id in company.polls:
            if self.config.sessions_per_poll:
                hour = 3600 * US
                start = max(self._year_start_us(), now_us - self.config.sessions_per_poll * hour)
                self.add_sessions(company, poll_id, self.config.sessions_per_poll, start, now_us)
        return company

    def company_for_key(self, key: str) -> Company | None:
        return self._by_key.get(key)

    def year_range_us(self) -> tuple[int, int]:
        """The current sandbox year, the session listing's default range."""
        year = datetime.fromtimestamp(self.clock.now(), UTC).year
        start = self._year_start_us(year)
        return start, self._year_start_us(year + 1) - 1

    def _year_start_us(self, year: int | None = None) -> int:
        year = year or datetime.fromtimestamp(self.clock.now(), UTC).year
        return int(datetime(year, 1, 1, tzinfo=UTC).timestamp()) * US

    # ---- launches --------------------------------------------------------
    def launch(self, company: Company, poll_id: int, users: list[UserIn], endpoint: str) -> Launch:
        """Queue a deployment of ``poll_id`` to ``users``; timings fixed now."""
        now = self.clock.now()
        self._launch_count += 1
        claimed = now if endpoint == "deploy_legacy" else now + self.config.claim_delay
        gap = 1.0 / self.config.dispatch_rate
        deployments = []
        fail = self.failures.outcome if self.failures else None
        for index, user in enumerate(users):
            outcome, line = self._route(company, user, index)
            if fail is not None and outcome == DEFAULT_OUTCOME:
                outcome = fail(user.country_code + user.cellphone, outcome)
            slot = claimed + index * gap
            taken = slot if user.eta is None else max(slot, float(user.eta))
            deployments.append(Deployment(*user, outcome, line, taken))
        launch = Launch(
            id=self._hex(),
            number=self._launch_count,
            poll_id=poll_id,
            batch_id=self._uuid(),
            endpoint=endpoint,
            business_scope_id=company.business_scope_id,
            received_at=now,
            claimed_at=claimed,
            # DONE once every user is taken or scheduled by its ETA.
            done_at=claimed + len(users) * gap,
            deployments=deployments,
        )
        company.launches[launch.id] = launch
        return launch

    @staticmethod
    def _route(company: Company, user: UserIn, index: int) -> tuple[int, str | None]:
        """Outcome and sending line; an unknown ``DS_`` line fails validation."""
        # A plain loop: this runs once per user of a 100k-user send.
        for key, _ in user.keys:
            if key == DEPLOYMENT_SQUAD:
                break
        else:
            return outcome_for(user.cellphone), company.lines[index % len(company.lines)]
        squads = [value for key, value in user.keys if key == DEPLOYMENT_SQUAD]
        lines = [value.removeprefix(DEPLOYMENT_SQUAD_PREFIX) for value in squads]
        if any(not v.startswith(DEPLOYMENT_SQUAD_PREFIX) for v in squads) or any(
            line not in company.lines for line in lines
        ):
            return VALIDATION_ERROR, None
        return outcome_for(user.cellphone), lines[index % len(lines)]

    def launch_of(self, company: Company, launch_id: str) -> Launch | None:
        return company.launches.get(launch_id)

    # ---- sessions --------------------------------------------------------
    def add_sessions(
        self, company: Company, poll_id: int, count: int, start_us: int, end_us: int
    ) -> SessionBlock:
        """``count`` generated sessions of a poll spread over ``[start, end]``."""
        block = SessionBlock(
            block_id=len(self._blocks) + 1,
            company_id=company.id,
            poll_id=poll_id,
            start_us=start_us,
            step_us=max(1, (end_us - start_us) // max(1, count)),
            count=count,
        )
        self._blocks[block.block_id] = block
        company.sessions.setdefault(poll_id, PollSessions()).blocks.append(block)
        return block

    def session(self, session_id: str, company: Company | None = None) -> SessionRecord | None:
        """A session by id (generated ones are materialised on first use).

        ``company`` None: any company's (session update carries no key).
        """
        record = self._records.get(session_id)
        if record is None:
            parsed = SessionBlock.parse_id(session_id)
            block = self._blocks.get(parsed[0]) if parsed else None
            if block is None or parsed is None or parsed[1] >= block.count:
                return None
            record = self._records[session_id] = block.materialise(parsed[1])
        if company is not None and record.company_id != company.id:
            return None
        return record

    def open_session(self, company: Company, launch: Launch, index: int) -> SessionRecord:
        """The session of deployment ``index``, opened (its question sent) if new."""
        existing = company.reply_sessions.get((launch.id, index))
        if existing is not None:
            return self._records[existing]
        d = launch.deployments[index]
        step = self.config.step_seconds
        history = OUTCOMES[d.outcome].history(d.taken_at, step, float("inf"))
        sent_at = next((at for status, at in history if status in SENT), d.taken_at)
        delivered = [at for status, at in history if status == "DELIVERED"]
        record = SessionRecord(
            id=f"sr-{self._hex(64)}",
            company_id=company.id,
            poll_id=launch.poll_id,
            created_us=int(sent_at * US),
            finished_us=int(max(sent_at, self.clock.now()) * US),
            country_code=d.country_code,
            cellphone=_network_cellphone(d),
            keys=dict(d.keys),
            history=[
                message(
                    "AI",
                    company.questions(launch.poll_id)[0],
                    int(sent_at),
                    int(delivered[0]) if delivered else None,
                    None,
                )
            ],
            conversation_id=launch.conversation_id(index),
        )
        self._records[record.id] = record
        company.reply_sessions[(launch.id, index)] = record.id
        company.sessions.setdefault(launch.poll_id, PollSessions()).add(record)
        return record

    def reply(
        self, company: Company, launch: Launch, index: int, text: str
    ) -> tuple[SessionRecord, bool, str, str | None]:
        """The user of deployment ``index`` answers the question the flow is on.

        Returns the session, whether this reply opened it, the question
        answered, and the flow's next one (None: the flow ends), for ``ask``
        once the answer's webhook is answered and merged, as the service does.
        """
        now = self.clock.now()
        d = launch.deployments[index]
        outcome = OUTCOMES[d.outcome]
        if outcome.status_at((now - d.taken_at) / self.config.step_seconds) not in SENT:
            raise NotRepliable(f"{d.country_code}{d.cellphone} has not received the message")
        created = (launch.id, index) not in company.reply_sessions
        record = self.open_session(company, launch, index)
        seconds = int(now)
        for entry in record.history:  # the user read what they answer
            if entry["message"]["sender"] == "AI" and entry["message"]["read_at"] is None:
                entry["message"]["read_at"] = seconds
        questions = company.questions(launch.poll_id)
        question = questions[min(record.answered, len(questions) - 1)]
        record.answered += 1
        record.history.append(message("USER", text, seconds, seconds, seconds))
        record.finished_us = int(now * US)
        following = questions[record.answered] if record.answered < len(questions) else None
        return record, created, question, following

    def ask(self, record: SessionRecord, question: str) -> None:
        """The flow goes on: its next question is sent."""
        now = self.clock.now()
        record.history.append(message("AI", question, int(now), int(now), None))
        record.finished_us = int(now * US)

    def merge_answer(
        self, record: SessionRecord, keys: dict[str, str], types: dict[str, str]
    ) -> None:
        """Merge a webhook answer's keys (and their types), as the service does,
        noted in the history."""
        record.set_keys(keys, types)
        now = int(self.clock.now())
        entry = message("AI", f"(variables set: {', '.join(keys)})", now, now, None)
        entry["message"]["extra"] = {
            "user_session_keys": [
                {"key": k, "value": v} | ({"type": types[k]} if k in types else {})
                for k, v in keys.items()
            ]
        }
        record.history.append(entry)

    def update_session(self, record: SessionRecord, keys: SessionKeys) -> None:
        """Merge the keys and continue the conversation with the next AI message."""
        record.set_keys(dict(keys), {})
        now = self.clock.now()
        names = ", ".join(key for key, _ in keys) or "nothing"
        record.history.append(
            message("AI", f"Thanks, noted ({names}). Next question?", int(now), int(now), None)
        )
        record.finished_us = int(now * US)

    def snapshot(self, company_id: str | None, users: bool, launch: str | None) -> JSON:
        now = self.clock.now()
        step = self.config.step_seconds
        return {
            "now": now,
            "companies": [
                company.snapshot(now, step, users, launch)
                for company in self.companies.values()
                if company_id in (None, company.id)
            ],
        }
