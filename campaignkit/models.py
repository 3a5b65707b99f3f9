"""The service's resources as frozen, slotted attrs classes.

Attribute names are the wire names of the spec's tables. Timestamps are
timezone-aware UTC datetimes. Request models (``User``, ``SessionKey``) do not
validate on construction: a call validates them, and reports every problem
with its path, before anything is sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any

import attrs

from .status import CampaignState, DeploymentStatus

__all__ = [
    "Agent",
    "CampaignAck",
    "CampaignStatus",
    "Deployment",
    "HistoryEntry",
    "LegacyDeployment",
    "Location",
    "Message",
    "Poll",
    "SessionKey",
    "SessionMeta",
    "SessionPage",
    "SessionUpdate",
    "SessionUser",
    "Tag",
    "User",
    "deployment_squad",
]

DEPLOYMENT_SQUAD = "deployment_squad"
DEPLOYMENT_SQUAD_PREFIX = "DS_"


class UnixSeconds:
    """Marks a timestamp sent as UNIX seconds; other timestamps are date-time text."""


UnixTime = Annotated[datetime, UnixSeconds]


@attrs.frozen
class Location:
    """The coordinates a ``"location"`` session key carries (JSON in its value)."""

    latitude: float
    longitude: float
    address: str | None = None


@attrs.frozen
class SessionKey:
    """A session variable: substituted into question texts, delivered to webhooks.

    ``type`` is what webhooks carry beside it (None, or e.g. ``"location"``);
    it goes on the wire only when set.
    """

    key: str
    value: str
    type: str | None = None

    @property
    def location(self) -> Location | None:
        """The coordinates of a location key (None when it holds none)."""
        try:
            data = json.loads(self.value)
            lat, lon = data["latitude"], data["longitude"]
        except (TypeError, ValueError, KeyError, RecursionError):
            return None
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lat, lon)):
            return None
        address = data.get("address")
        return Location(float(lat), float(lon), address if isinstance(address, str) else None)


def session_keys(keys: Iterable[SessionKey] | Mapping[str, str]) -> tuple[SessionKey, ...]:
    """Normalise a mapping or an iterable of :class:`SessionKey` to a tuple.

    Anything else is kept as given (in a tuple when iterable) for validation to
    report.
    """
    if isinstance(keys, tuple):
        return keys
    if isinstance(keys, Mapping):
        return tuple(SessionKey(k, v) for k, v in keys.items())
    if isinstance(keys, Iterable) and not isinstance(keys, str | bytes):
        return tuple(keys)
    return keys


@attrs.frozen(kw_only=True)
class User:
    """One recipient of a deployment.

    ``user_session_keys`` accepts a mapping or :class:`SessionKey` items;
    ``deployment_eta`` accepts UNIX seconds or an aware datetime and schedules
    the deployment.
    """

    cellphone: str
    country_code: str
    user_session_keys: tuple[SessionKey, ...] = attrs.field(default=(), converter=session_keys)
    deployment_eta: int | datetime | None = None

    @property
    def phone(self) -> str:
        """``country_code`` followed by ``cellphone``, as given."""
        return f"{self.country_code}{self.cellphone}"

    @classmethod
    def from_phone(cls, number: str, **fields: Any) -> User:
        """The user of a whole number written as text (``"+57 300 123
        4567"``), split into its country code and national number; other
        fields as the constructor takes them.

        Raises :class:`~campaignkit.ValidationError` naming ``number`` when
        no country has it.
        """
        from ._input.phones import Phone

        phone = Phone.parse(number)
        return cls(cellphone=phone.cellphone, country_code=phone.country_code, **fields)


def deployment_squad(cellphone: str | int) -> SessionKey:
    """The ``deployment_squad`` variable that makes the sending line
    ``cellphone`` deploy (value ``DS_<cellphone>``); give several for several lines."""
    return SessionKey(DEPLOYMENT_SQUAD, f"{DEPLOYMENT_SQUAD_PREFIX}{cellphone}")


@attrs.frozen
class Poll:
    """A conversation (flow) of the company."""

    id: int
    name: str


@attrs.frozen
class CampaignAck:
    """The ``202`` answer of a campaign submission; track it with ``client.track``."""

    message: str
    id: str
    batch_id: str
    launch_request_id: str
    status_url: str


@attrs.frozen
class Deployment:
    """One user's deployment; ``status`` is None until the runtime takes it."""

    conversation_id: str
    service_id: str
    cellphone: str
    business_scope_id: str | None = None
    username: str | None = None
    status: DeploymentStatus | None = None


@attrs.frozen
class CampaignStatus:
    """A campaign request and its deployments.

    ``deployments`` is a read-only sequence (a tuple when built by hand); a
    decoded answer's makes its :class:`Deployment` items as they are read.
    """

    launch_request_id: str
    status: CampaignState
    poll_id: int
    deployments: Sequence[Deployment]


@attrs.frozen
class SessionUpdate:
    """The answer of a session update."""

    message: str
    session_id: str


@attrs.frozen
class SessionUser:
    """The user of a session."""

    country_code: str
    cellphone: str


@attrs.frozen
class SessionMeta:
    """Metadata of one session; ``finished_at`` is None while it is open."""

    id: str
    created_at: datetime
    user: SessionUser
    finished_at: datetime | None = None


@attrs.frozen
class SessionPage:
    """One page of a session listing; ``next_id`` is None on the last page.

    ``results`` is a read-only sequence (a tuple when built by hand); a decoded
    page's makes its :class:`SessionMeta` items as they are read.
    """

    results: Sequence[SessionMeta]
    next_id: str | None = None


@attrs.frozen
class Message:
    """A message of a session history."""

    type: str
    sender: str
    text: str
    created_at: UnixTime
    file_url: str | None = None
    delivered_at: UnixTime | None = None
    read_at: UnixTime | None = None
    extra: Any = None


@attrs.frozen
class HistoryEntry:
    """An entry of a session history (observed type: ``MESSAGE``)."""

    type: str
    message: Message


@attrs.frozen
class Tag:
    """A team an agent belongs to."""

    id: int
    name: str


@attrs.frozen
class Agent:
    """An active agent; ``id`` (or ``email``) is what an assignment endpoint returns."""

    id: int
    first_name: str
    last_name: str
    email: str
    tags: tuple[Tag, ...] = ()


@attrs.frozen
class LegacyDeployment:
    """The answer of the retired legacy deploy endpoint (field names as on the wire)."""

    message: str
    id: str
    batch_id: str
    new_last_scheduleded_deployment: datetime
    conversations_id: tuple[str, ...]
