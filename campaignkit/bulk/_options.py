"""A bulk send's options as one value, validated once: :class:`BulkOptions`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypedDict

import attrs

from .._guards import Breaker, Canary, guard_options, guard_problems
from .._input.validation import Problems, path_segment, raise_problems
from ..config import is_positive_seconds, is_retry_count
from ..errors import ValidationError
from ..progress import ProgressUpdate
from ._follow import follow_problems
from ._rules import NO_RULES, SendRules, TzFor, count_problems, rules_problems
from ._stopping import DEFAULT_INTERRUPT_GRACE
from ._windows import SendWindow

if TYPE_CHECKING:
    from ..ledger import Ledger

DEFAULT_CHUNK_SIZE: Final = 1000
"""Users per request. The spec states no maximum users per campaign request;
1000 keeps a body near 100 KB and a lost chunk small."""
MAX_CONCURRENCY: Final = 1000
"""The most chunk requests a bulk send has under way at once (a task each)."""

JournalPath: TypeAlias = "str | os.PathLike[str] | Ledger"
ProgressCallback: TypeAlias = Callable[[ProgressUpdate], Awaitable[None] | None]


@attrs.frozen(kw_only=True)
class BulkOptions:
    """How a bulk send runs: ``send_bulk(poll_id, users, options=BulkOptions(...))``,
    or the same fields as keywords of ``send_bulk``; ``submit_run``,
    ``BulkWorkers.submit`` and :class:`~campaignkit.workers.BulkWorkers` take
    the fields that apply to them. Every field is checked when the value is
    made, before anything is read or sent: a :class:`ValidationError` names
    each field at fault.

    ``chunk_size`` users per request, ``concurrency`` requests at once, at
    most ``rate_limit`` requests started per second. ``journal``: the ledger
    (an SQLite path, a ``postgresql://`` DSN or a ledger object) filing the
    run ``run`` (default ``poll-<poll_id>``); ``retry_rejected`` sends
    again recipients it holds rejected; ``ignore_suppression`` sends to
    numbers on its suppression list (this send only). ``on_progress``
    receives a :class:`~campaignkit.ProgressUpdate` at most every 0.1 s;
    ``keep_accepted_users`` keeps the users of accepted chunks in the
    report. ``timeout`` and ``max_retries`` apply to each chunk's request;
    ``interrupt_grace``: seconds the requests under way get to be answered
    when the send is interrupted. ``send_window``, ``daily_limit``,
    ``lines``, ``tz_for`` and ``default_tz`` protect the sending line;
    ``follow`` (for at most ``follow_timeout`` seconds) tracks every
    accepted launch before returning. ``breaker``, ``cooldown``
    and ``skip_open_conversations`` protect the line from the
    run itself (the run pauses, or people are deferred); ``max_recipients``
    refuses a larger input before anything is sent; ``dry_run`` reports
    what the send would do now, sending nothing and changing no ledger;
    ``canary`` sends the first recipients, follows them, and sends the
    rest only if their outcomes hold (else the run pauses).
    See :func:`campaignkit.bulk.send_bulk`.
    """

    chunk_size: int = DEFAULT_CHUNK_SIZE
    concurrency: int = 4
    rate_limit: float | None = None
    journal: JournalPath | None = None
    run: str | None = None
    retry_rejected: bool = False
    ignore_suppression: bool = False
    on_progress: ProgressCallback | None = None
    keep_accepted_users: bool = False
    timeout: float | None = None
    max_retries: int | None = None
    interrupt_grace: float = DEFAULT_INTERRUPT_GRACE
    send_window: SendWindow | None = None
    daily_limit: int | None = None
    lines: Sequence[str] | None = None
    tz_for: TzFor | None = None
    default_tz: str | None = None
    follow: bool = False
    follow_timeout: float | None = None
    breaker: Breaker | None = None
    cooldown: timedelta | None = None
    skip_open_conversations: bool = False
    max_recipients: int | None = None
    dry_run: bool = False
    canary: Canary | None = None
    rules: SendRules = attrs.field(init=False, default=NO_RULES, repr=False, eq=False)
    """The send window, daily limit, lines and default zone, as a run keeps them."""

    def __attrs_post_init__(self) -> None:
        problems = count_problems("chunk_size", self.chunk_size)
        problems += count_problems("concurrency", self.concurrency, most=MAX_CONCURRENCY)
        if self.rate_limit is not None and not is_positive_seconds(self.rate_limit):
            problems.append(
                ("rate_limit", f"must be a number > 0 (requests/s), got {self.rate_limit!r}")
            )
        if self.run is not None and (not isinstance(self.run, str) or not self.run.strip()):
            problems.append(("run", f"must be a non-empty string, got {self.run!r}"))
        for name in ("retry_rejected", "ignore_suppression", "keep_accepted_users"):
            if not isinstance(value := getattr(self, name), bool):
                problems.append((name, f"must be True or False, got {value!r}"))
        if self.on_progress is not None and not callable(self.on_progress):
            problems.append(
                ("on_progress", f"must be a callable or None, got {self.on_progress!r}")
            )
        if self.timeout is not None and not is_positive_seconds(self.timeout):
            problems.append(
                ("timeout", f"must be a positive number of seconds, got {self.timeout!r}")
            )
        if self.max_retries is not None and not is_retry_count(self.max_retries):
            problems.append(("max_retries", f"must be an int >= 0, got {self.max_retries!r}"))
        grace = self.interrupt_grace
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
            problems.append(("interrupt_grace", f"must be a number of seconds >= 0, got {grace!r}"))
        rules, rule_problems = rules_problems(
            self.send_window, self.daily_limit, self.lines, self.tz_for, self.default_tz
        )
        problems += rule_problems + follow_problems(self.follow, self.follow_timeout)
        problems += guard_problems(
            self.breaker,
            self.cooldown,
            self.skip_open_conversations,
            self.max_recipients,
            self.canary,
        )
        if not isinstance(self.dry_run, bool):
            problems.append(("dry_run", f"must be True or False, got {self.dry_run!r}"))
        raise_problems(problems)
        object.__setattr__(self, "rules", rules)

    @classmethod
    def of(cls, options: BulkOptions | None, keywords: Mapping[str, Any]) -> BulkOptions:
        """``options``, or the value ``keywords`` make: one of the two styles."""
        if options is None:
            return cls(**keywords)
        if keywords:
            raise ValidationError(
                [("options", f"give options= or keywords, not both (also got {_named(keywords)})")]
            )
        if not isinstance(options, BulkOptions):
            raise ValidationError([("options", f"must be a BulkOptions, got {options!r}")])
        return options

    def guards(self) -> dict[str, Any]:
        """The guards the ledger applies, as the run keeps them."""
        return guard_options(self.breaker, self.cooldown, self.skip_open_conversations, self.canary)

    def refuse(self, names: Iterable[str], why: str) -> None:
        """Raise a :class:`ValidationError` naming each of ``names`` not left at its default."""
        fields = attrs.fields_dict(BulkOptions)
        given = [name for name in names if getattr(self, name) != fields[name].default]
        raise_problems([(name, why) for name in given])


class BulkOptionsDict(TypedDict, total=False):
    """:class:`BulkOptions`'s fields as keywords (``send_bulk(..., chunk_size=500)``)."""

    chunk_size: int
    concurrency: int
    rate_limit: float | None
    journal: JournalPath | None
    run: str | None
    retry_rejected: bool
    ignore_suppression: bool
    on_progress: ProgressCallback | None
    keep_accepted_users: bool
    timeout: float | None
    max_retries: int | None
    interrupt_grace: float
    send_window: SendWindow | None
    daily_limit: int | None
    lines: Sequence[str] | None
    tz_for: TzFor | None
    default_tz: str | None
    follow: bool
    follow_timeout: float | None
    breaker: Breaker | None
    cooldown: timedelta | None
    skip_open_conversations: bool
    max_recipients: int | None
    dry_run: bool
    canary: Canary | None


def bulk_problems(
    poll_id: object,
    users: object,
    *,
    chunk_size: object = DEFAULT_CHUNK_SIZE,
    concurrency: object = 1,
    rate_limit: object = None,
    run: object = None,
    interrupt_grace: object = 0.0,
) -> tuple[str, Problems]:
    """The poll id as a path segment, and every problem of it, of ``users``
    and of the options (those of :class:`BulkOptions`)."""
    segment, problems = input_problems(poll_id, users)
    options: dict[str, Any] = {
        "chunk_size": chunk_size,
        "concurrency": concurrency,
        "rate_limit": rate_limit,
        "run": run,
        "interrupt_grace": interrupt_grace,
    }
    try:
        BulkOptions(**options)
    except ValidationError as invalid:
        problems += invalid.problems
    return segment, problems


def checked_options(
    poll_id: object, users: object, options: BulkOptions | None, keywords: Mapping[str, Any]
) -> tuple[str, BulkOptions]:
    """The poll id as a path segment and the options of a bulk send (see
    :meth:`BulkOptions.of`); a :class:`ValidationError` names every problem
    of them and of ``users``."""
    segment, problems = input_problems(poll_id, users)
    try:
        options = BulkOptions.of(options, keywords)
    except ValidationError as invalid:
        raise ValidationError([*problems, *invalid.problems]) from None
    raise_problems(problems)
    return segment, options


def input_problems(poll_id: object, users: object) -> tuple[str, Problems]:
    """The poll id as a path segment, and every problem of it and of ``users``."""
    problems: Problems = []
    segment = path_segment("poll_id", poll_id, problems)
    if isinstance(users, str | bytes | Mapping) or not isinstance(users, Iterable | AsyncIterable):
        problems.append(("users", f"expected an iterable of users, got {type(users).__name__}"))
    return segment, problems


def _named(keywords: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}=" for name in keywords)
