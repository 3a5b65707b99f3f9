"""What the commands print: JSON, tables, one-line errors, progress on stderr
(a rich live display when rich is installed and stderr is a terminal)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import shutil
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import attrs
import orjson

from .. import errors
from .._funnel import Funnel
from .._words import counted
from ..models import CampaignStatus, HistoryEntry
from ..progress import ProgressUpdate, campaign_update, failure_words, percent
from ..status import CampaignState, DeploymentStatus, stage_of


def plain(value: Any) -> Any:
    """attrs instances (nested) as plain JSON-able data."""
    if attrs.has(type(value)):
        return attrs.asdict(value, recurse=True, value_serializer=_made_on_access)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _made_on_access(_: object, __: object, value: Any) -> Any:
    # A decoded status's deployments are a sequence that makes each one when
    # read, which asdict does not walk as it walks a tuple.
    if isinstance(value, Sequence) and not isinstance(value, str | bytes | list | tuple):
        return [plain(v) for v in value]
    return value


def dumps(data: Any) -> bytes:
    return orjson.dumps(plain(data), default=str)


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def funnel_table(funnel: Funnel) -> str:
    """A run's funnel, each failure status with its words (as the status
    table and the dashboard say them)."""
    words = {f"failed: {status}": failure_words(status) for status in funnel.failed}
    # "opted out 0" read as a denial above a failure that says the person
    # opted out: the webhooks' opt-outs are shown only when there are some.
    rows = [
        (name, n, words.get(name, "")) if funnel.known(name) else (name, "-", "not followed")
        for name, n in funnel.rows()
        if n or name != "opted out"
    ]
    return table(rows, ["funnel", "users", "meaning"])


def program() -> str:
    """How to run this command again from the shell it was started from:
    ``campaignkit`` when that name on PATH is this program, else its path
    (``.venv/bin/campaignkit`` before the virtualenv is activated), or
    ``python -m campaignkit.cli`` with this interpreter."""
    argv0 = sys.argv[0] if sys.argv else ""
    name = os.path.splitext(os.path.basename(argv0))[0]
    if name == "campaignkit" and os.path.isfile(argv0):
        found = shutil.which(os.path.basename(argv0))
        with contextlib.suppress(OSError):
            if found and os.path.samefile(found, argv0):
                return "campaignkit"
        return shlex.quote(_short(argv0))
    if argv0.endswith(os.path.join("campaignkit", "cli", "__main__.py")):
        return f"{shlex.quote(_short(sys.executable))} -m campaignkit.cli"
    return "campaignkit"  # run in process: campaignkit.cli.run([...])


def command_line(*args: str) -> str:
    """This program with ``args``, each quoted for the shell: a printed
    command is pasted as it is, and a run's name or a file's may hold
    anything (``$(...)``, ``;``)."""
    return " ".join([program(), *map(shlex.quote, args)])


def _short(path: str) -> str:
    """``path`` relative to the working directory when under it."""
    relative = os.path.relpath(path)
    if relative.startswith(os.pardir):
        return os.path.abspath(path)
    return relative if os.sep in relative else os.path.join(os.curdir, relative)


def one_line(exc: BaseException) -> str:
    """An error as the one line a person reads on stderr."""
    if isinstance(exc, errors.ValidationError):
        problems = "; ".join(f"{path}: {message}" for path, message in exc.problems)
        return f"invalid input: {problems}"
    if isinstance(exc, errors.AmbiguousSendError):
        text = " ".join(str(exc).split())
        cause = " ".join(str(exc.cause).split()) if exc.cause else ""
        return f"{text} ({cause})" if cause and cause not in text else text
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, errors.ConfigurationError):
        # The client's advice names its arguments; the CLI's are flags.
        text = re.sub(r"pass (\w+)=", lambda m: f"pass --{m.group(1).replace('_', '-')}", text)
    if isinstance(exc, errors.NotFoundError) and no_such_path(exc):
        return (
            f"{text} (the server has no such path: is the service URL's path prefix right? "
            "--base-url, --campaign-url, --agent-url)"
        )
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return (
            f"{text} (the port is in use by another program: pick another port, 0 for a free one)"
        )
    if isinstance(exc, errors.ConnectionError) and exc.proxy:
        return f"{text} (is the proxy right and reachable? it is the environment's)"
    if isinstance(exc, errors.ConnectionError | errors.TimeoutError | OSError):
        return f"{text} (is the service URL right and reachable?)"
    return text


def no_such_path(exc: errors.NotFoundError) -> bool:
    """A 404 for the path itself (a wrong base URL), not for a resource: no
    error of the service in the body, or only a router's bare "Not Found"."""
    said = exc.detail or exc.message
    return said is None or said.strip().rstrip(".").lower() == "not found"


def ambiguous_advice(poll_id: str, count: int, sent_at: datetime, resend: str | None) -> str:
    """What a person can do about ``count`` users whose send is ambiguous:
    the command that shows who was reached, and how to resend knowingly."""
    since = sent_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    who = "this user was" if count == 1 else f"these {counted(count, 'user')} were"
    lines = [
        f"{who} not sent again. Who was reached: a person who replies opens a session, "
        "listed with their phone by",
        "  " + command_line("sessions", poll_id, "--since", since, "--format", "csv"),
        "and your webhook gets a delivered event for each person the service messaged.",
    ]
    if resend:
        lines += ["To send anyway, knowing that some may get the message twice:", f"  {resend}"]
    return "\n".join(lines)


# -- campaign status -------------------------------------------------------------


def stages_line(update: ProgressUpdate) -> str:
    """The progress line's detail: people per stage (the request's state is
    said once, when it changes: :func:`state_line`)."""
    stages = ", ".join(f"{n} {stage}" for stage, n in update.stages().items())
    return f"settled; {stages}".rstrip("; ")


def state_line(state: CampaignState) -> str:
    return f"request {state.value}: {state.description}"


def status_counts(status: CampaignStatus) -> Counter[DeploymentStatus | None]:
    return Counter(d.status for d in status.deployments)


def settled(status: CampaignStatus) -> int:
    return sum(1 for d in status.deployments if stage_of(d.status).is_settled)


def counts_json(status: CampaignStatus) -> dict[str, int]:
    return {str(k): v for k, v in status_counts(status).items()}


def status_json(status: CampaignStatus) -> dict[str, Any]:
    """``status`` as plain data, with its per-status ``counts``."""
    return {**plain(status), "counts": counts_json(status)}


def status_table(status: CampaignStatus) -> str:
    """Deployments per status, with each one's stage and meaning in words, and
    the people per stage below."""
    counts = status_counts(status)
    total = sum(counts.values())
    rows = [
        (
            "(not taken)" if s is None else s.value,
            n,
            percent(n, total),
            stage_of(s),
            "not taken by the service yet" if s is None else s.description,
        )
        for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    ]
    update = campaign_update(counts, status.status, True)
    return (
        table(rows, ["status", "count", "share of recipients", "stage", "meaning"])
        + f"\n{update.summary()}"
    )


def format_history(history: Sequence[HistoryEntry]) -> str:
    lines = []
    for entry in history:
        m = entry.message
        at = m.created_at.strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{at}  {m.sender:<4}  {m.text}")
    return "\n".join(lines) if lines else "(no messages)"


# -- progress --------------------------------------------------------------------


def rich_available() -> bool:
    try:
        import rich.progress  # noqa: F401
    except ImportError:
        return False
    return True


class ProgressDisplay:
    """A progress display on stderr: rich when possible, else a plain line.

    The plain line is redrawn in place on a terminal; elsewhere a line is
    written at most every ``interval`` seconds, plus a final one.
    """

    def __init__(self, err: TextIO, label: str, *, enabled: bool = True, interval: float = 1.0):
        self._err = err
        self._label = label
        self._enabled = enabled
        self._interval = interval
        self._tty = bool(getattr(err, "isatty", lambda: False)())
        self._rich: Any = None
        self._task: Any = None
        self._last_line = 0.0
        self._last_text = ""
        self._written = False
        if enabled and self._tty and rich_available():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[detail]}"),
                console=Console(file=err),
                transient=False,
            )

    def __enter__(self) -> ProgressDisplay:
        if self._rich is not None:
            self._rich.start()
            self._task = self._rich.add_task(self._label, total=None, detail="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self._enabled and self._last_text and (self._tty or not self._written):
            self._write(self._last_text, final=True)

    def update(self, done: int, total: int | None, detail: str = "") -> None:
        if not self._enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, completed=done, total=total, detail=detail)
            return
        if total:
            filled = int(20 * done / total)
            bar = "#" * filled + "." * (20 - filled)
            text = f"{self._label} [{bar}] {done}/{total} {detail}".rstrip()
        else:
            text = f"{self._label} {done} {detail}".rstrip()
        self._last_text = text
        self._written = False
        now = time.monotonic()
        if self._tty or now - self._last_line >= self._interval:
            self._last_line = now
            self._write(text, final=False)
            self._written = True

    def say(self, line: str) -> None:
        """``line`` once, above the progress line (which stays last)."""
        if not self._enabled:
            return
        if self._rich is not None:
            self._rich.console.print(line, markup=False, highlight=False)
        elif self._tty:
            self._err.write("\r\x1b[2K" + line + "\n" + self._last_text)
            self._err.flush()
        else:
            self._err.write(line + "\n")
            self._err.flush()

    def _write(self, text: str, *, final: bool) -> None:
        if self._tty:
            self._err.write("\r\x1b[2K" + text + ("\n" if final else ""))
        elif final or text:
            self._err.write(text + "\n")
        self._err.flush()
