"""What the commands print: JSON, tables, one-line errors, progress on stderr
(a rich live display when rich is installed and stderr is a terminal)."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

import attrs
import orjson

from .. import errors
from ..models import CampaignStatus, HistoryEntry
from ..progress import ProgressUpdate, campaign_update
from ..status import DeploymentStatus, is_in_progress, stage_of


def plain(value: Any) -> Any:
    """attrs instances (nested) as plain JSON-able data."""
    if attrs.has(type(value)):
        return attrs.asdict(value, recurse=True)
    if isinstance(value, list | tuple):
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


def one_line(exc: BaseException) -> str:
    """An error as the one line a person reads on stderr."""
    if isinstance(exc, errors.ValidationError):
        problems = "; ".join(f"{path}: {message}" for path, message in exc.problems)
        return f"invalid input: {problems}"
    if isinstance(exc, errors.AmbiguousSendError):
        cause = f" ({exc.cause})" if exc.cause else ""
        return (
            f"{exc}{cause}. It may or may not have reached the service: do not resend "
            "blindly, check with `campaignkit status`/`sessions` first"
        )
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, errors.ConfigurationError):
        # The client's advice names its arguments; the CLI's are flags.
        text = re.sub(r"pass (\w+)=", lambda m: f"pass --{m.group(1).replace('_', '-')}", text)
    if isinstance(exc, errors.ConnectionError | errors.TimeoutError | OSError):
        return f"{text} (is the service URL right and reachable?)"
    return text


# -- campaign status -------------------------------------------------------------


def stages_line(update: ProgressUpdate) -> str:
    """The progress line's detail: people per stage, the request in words."""
    stages = ", ".join(f"{n} {stage}" for stage, n in update.stages().items())
    if update.state is None:
        return f"settled; {stages}".rstrip("; ")
    return f"settled; {stages}; request {update.state.description}"


def status_counts(status: CampaignStatus) -> Counter[DeploymentStatus | None]:
    return Counter(d.status for d in status.deployments)


def settled(status: CampaignStatus) -> int:
    return sum(1 for d in status.deployments if not is_in_progress(d.status))


def counts_json(status: CampaignStatus) -> dict[str, int]:
    return {str(k): v for k, v in status_counts(status).items()}


def status_json(status: CampaignStatus) -> dict[str, Any]:
    """``status`` as plain data, with its per-status ``counts``."""
    return {**plain(status), "counts": counts_json(status)}


def status_table(status: CampaignStatus) -> str:
    """Deployments per status, with each one's stage and meaning in words, and
    the people per stage below."""
    counts = status_counts(status)
    total = sum(counts.values()) or 1
    rows = [
        (
            "(not taken)" if s is None else s.value,
            n,
            f"{100 * n / total:.1f}%",
            stage_of(s),
            "not taken by the service yet" if s is None else s.description,
        )
        for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    ]
    update = campaign_update(counts, status.status, True)
    return table(rows, ["status", "count", "share", "stage", "meaning"]) + f"\n{update.summary()}"


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


class Progress:
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

    def __enter__(self) -> Progress:
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

    def _write(self, text: str, *, final: bool) -> None:
        if self._tty:
            self._err.write("\r\x1b[2K" + text + ("\n" if final else ""))
        elif final or text:
            self._err.write(text + "\n")
        self._err.flush()
