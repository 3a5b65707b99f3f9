"""The ``campaignkit`` console command.

Commands: demo, sandbox, send, track, status, sessions, history, polls,
agents, update-session, worker, runs (``campaignkit COMMAND --help`` for each).

Configuration comes from the flags or, when a flag is not given, from the
environment: ``CAMPAIGNKIT_API_KEY``, ``CAMPAIGNKIT_BASE_URL``,
``CAMPAIGNKIT_CAMPAIGN_URL``, ``CAMPAIGNKIT_AGENT_URL``. Prefer the variable
for the key (a flag is visible to other users of the machine); the key is
never printed, not even with ``--debug``.

``--json`` prints machine-readable JSON on stdout (one document, or JSON
Lines for ``sessions``). Progress goes to stderr: a rich live display when
``rich`` is installed (``pip install 'campaignkit[cli]'``) and stderr is a
terminal, a plain progress line otherwise; ``--quiet`` turns it off.
Errors are one line on stderr (``campaignkit: error: ...``) and a non-zero
exit code; ``--debug`` adds the traceback.

Exit codes:
  0    success
  1    the service answered with an error, or its answer could not be read
  2    usage: bad flags, bad input file, invalid users or arguments
  3    configuration or authentication: no API key, bad URL, 401
  4    ambiguous send: the request may or may not have reached the service
       (do not resend blindly; check with `status` or `sessions` first)
  5    network: connection failure, or a timeout (including `track --track-timeout`)
  6    bulk send finished, but some users were not sent (invalid or failed chunks)
  130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import os
import re
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TextIO

import attrs
import orjson

from . import errors
from ._version import __version__
from .bulk import DEFAULT_CHUNK_SIZE
from .client import CampaignClient
from .config import ENV_API_KEY, ENV_URLS
from .ledger import AMBIGUOUS, STATES, Ledger, Record, RunInfo, ledger_from
from .ledger._sqlite import DEFAULT_CLAIM_TTL
from .models import CampaignStatus, SessionKey, SessionMeta, User
from .status import DeploymentStatus, is_in_progress

__all__ = ["EXIT", "main", "run"]

EXIT = {
    "ok": 0,
    "error": 1,
    "usage": 2,
    "config": 3,
    "ambiguous": 4,
    "network": 5,
    "partial": 6,
    "interrupted": 130,
}

EPILOG = __doc__[__doc__.index("Exit codes:") :]


class UsageError(Exception):
    """Bad arguments or input detected by the CLI itself (exit 2)."""


# -- output ------------------------------------------------------------------


@attrs.define
class Ctx:
    """What a command needs besides its arguments."""

    args: argparse.Namespace
    out: TextIO
    err: TextIO

    @property
    def json(self) -> bool:
        return bool(self.args.json)

    def print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """Human-readable remarks that must not pollute stdout (go to stderr)."""
        if not self.args.quiet:
            print(text, file=self.err, flush=True)

    def emit(self, data: Any) -> None:
        self.out.write(dumps(data).decode() + "\n")
        self.out.flush()

    def client(self, **overrides: Any) -> CampaignClient:
        a = self.args
        settings: dict[str, Any] = {
            "base_url": a.base_url,
            "campaign_url": a.campaign_url,
            "agent_url": a.agent_url,
        }
        if a.timeout is not None:
            settings["timeout"] = a.timeout
        if a.max_retries is not None:
            settings["max_retries"] = a.max_retries
        settings.update(overrides)
        return CampaignClient(a.api_key, **settings)


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


# -- progress ------------------------------------------------------------------


def _rich_available() -> bool:
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
        if enabled and self._tty and _rich_available():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
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


def count_summary(counts: Counter[Any], limit: int = 4) -> str:
    top = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[:limit]
    return ", ".join(f"{'waiting' if s is None else s} {n}" for s, n in top)


def status_counts(status: CampaignStatus) -> Counter[DeploymentStatus | None]:
    return Counter(d.status for d in status.deployments)


def settled(status: CampaignStatus) -> int:
    return sum(1 for d in status.deployments if not is_in_progress(d.status))


def status_json(status: CampaignStatus) -> dict[str, Any]:
    """``status`` as plain data, with its per-status ``counts``."""
    return {**plain(status), "counts": counts_json(status)}


def counts_json(status: CampaignStatus) -> dict[str, int]:
    return {str(k): v for k, v in status_counts(status).items()}


def status_table(status: CampaignStatus) -> str:
    counts = status_counts(status)
    total = sum(counts.values()) or 1

    def kind(s: DeploymentStatus | None) -> str:
        if s is None or s.is_in_progress:
            return "in progress"
        if s.is_success:
            return "sent" if s.is_final else "sent (unconfirmed)"
        return "failed" if s.is_failure else "unknown"

    rows = [
        (
            "(not taken)" if s is None else s.value,
            n,
            f"{100 * n / total:.1f}%",
            kind(s),
        )
        for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    ]
    kinds: Counter[str] = Counter()
    for s, n in counts.items():
        kinds[kind(s).split(" ")[0]] += n
    summary = ", ".join(f"{k} {n} ({100 * n / total:.0f}%)" for k, n in kinds.most_common())
    return (
        table(rows, ["status", "count", "share", "kind"])
        + f"\ntotal {sum(counts.values())}: {summary}"
    )


# -- argument parsing ------------------------------------------------------------


def _timestamp(text: str) -> int:
    """UNIX seconds, or an ISO 8601 date / date-time (naive means UTC)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a UNIX timestamp or ISO 8601 date/time: {text!r}"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp())


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _common() -> _Parser:
    """Options accepted before or after the command name."""
    common = _Parser(add_help=False)
    s = argparse.SUPPRESS
    g = common.add_argument_group("connection (default: the CAMPAIGNKIT_* variables)")
    g.add_argument("--api-key", default=s, help=f"API key (prefer {ENV_API_KEY})")
    g.add_argument("--base-url", default=s, help=f"main host ({ENV_URLS['base_url']})")
    g.add_argument("--campaign-url", default=s, help=f"campaign host ({ENV_URLS['campaign_url']})")
    g.add_argument("--agent-url", default=s, help=f"agent host ({ENV_URLS['agent_url']})")
    g.add_argument("--timeout", type=_positive_float, default=s, help="seconds per request")
    g.add_argument("--max-retries", type=int, default=s, help="retries of a failed read")
    o = common.add_argument_group("output")
    o.add_argument("--json", action="store_true", default=s, help="machine-readable output")
    o.add_argument("-q", "--quiet", action="store_true", default=s, help="no progress/notes")
    o.add_argument("--debug", action="store_true", default=s, help="tracebacks on errors")
    return common


COMMON_DEFAULTS: dict[str, Any] = {
    "api_key": None,
    "base_url": None,
    "campaign_url": None,
    "agent_url": None,
    "timeout": None,
    "max_retries": None,
    "json": False,
    "quiet": False,
    "debug": False,
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT["usage"], f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = _Parser(
        prog="campaignkit",
        description="Send, track and inspect campaigns of the Conversation Campaign and "
        "Session Service; `campaignkit demo` shows it all on a local sandbox.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"campaignkit {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help,
            description=description or help,
            parents=[common],
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    p = command(
        "demo",
        "the whole story on an in-process sandbox, in under a minute",
        "Start a sandbox, send a campaign of 200 users mixing outcomes, track it live, "
        "print the per-status table, receive a user's first reply on a real local webhook "
        "server, update the session and print its history. No account, no network.",
    )
    p.add_argument(
        "--speed", type=_positive_float, default=1.0, help="sandbox clock speed (1: ~10 s)"
    )
    p.add_argument("--users", type=_positive_int, default=200, help="campaign size (200)")
    p.add_argument("--seed", type=int, default=7)
    p.set_defaults(func=cmd_demo, needs_client=False)

    p = command("sandbox", "run the local sandbox server until Ctrl-C")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765, help="0 picks a free port (8765)")
    p.add_argument("--speed", type=_positive_float, default=1.0, help="sandbox seconds per second")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reply-probability", type=float, default=0.0, help="spontaneous replies")
    p.add_argument("--legacy", action="store_true", help="serve the retired legacy deploy")
    p.set_defaults(func=cmd_sandbox, needs_client=False)

    p = command(
        "send",
        "send a campaign to users from a CSV or JSON file",
        "Send POLL_ID to the users of FILE ('-' for stdin). CSV: a header row with "
        "cellphone, country_code, optional deployment_eta (UNIX seconds or ISO 8601); every "
        "other column is a session variable. JSON: an array of user objects as on the wire "
        "({cellphone, country_code, user_session_keys, deployment_eta?}; user_session_keys "
        'may be an object), or {"users": [...]}.',
    )
    p.add_argument("poll_id")
    p.add_argument("file", help="users file (.csv / .json / .jsonl, or '-')")
    p.add_argument("--format", choices=["csv", "json"], help="default: from the file name")
    p.add_argument("--track", action="store_true", help="track the campaign after sending")
    bulk = p.add_argument_group("bulk (large lists: chunks, concurrency, resumable journal)")
    bulk.add_argument("--bulk", action="store_true", help="send in chunks")
    bulk.add_argument("--chunk-size", type=_positive_int, default=DEFAULT_CHUNK_SIZE)
    bulk.add_argument("--concurrency", type=_positive_int, default=4)
    bulk.add_argument(
        "--journal",
        help="delivery ledger: an SQLite file or a postgresql:// DSN; rerun to resume",
    )
    bulk.add_argument("--run", help="the run's name in the ledger (default: poll-POLL_ID)")
    bulk.add_argument(
        "--retry-rejected", action="store_true", help="send again the run's rejected users"
    )
    p.set_defaults(func=cmd_send, needs_client=True)

    p = command("track", "follow a campaign live until DONE (or settled)")
    p.add_argument("launch_request_id")
    p.add_argument(
        "--settled", action="store_true", help="go on until no deployment is in progress"
    )
    p.add_argument("--poll-interval", type=_positive_float, default=1.0, help="seconds (1)")
    p.add_argument(
        "--max-interval",
        type=_positive_float,
        default=5.0,
        help="longest wait between polls while nothing changes (5)",
    )
    p.add_argument(
        "--track-timeout",
        dest="track_timeout",
        type=_positive_float,
        help="give up after this many seconds (exit 5)",
    )
    p.set_defaults(func=cmd_track, needs_client=True)

    p = command("status", "a campaign's state and per-status counts")
    p.add_argument("launch_request_id")
    p.add_argument("--deployments", action="store_true", help="list every deployment")
    p.set_defaults(func=cmd_status, needs_client=True)

    p = command(
        "sessions",
        "export every session of a poll (all pages) as JSON Lines or CSV",
        "Export every session of POLL_ID, following the pagination cursor. Without "
        "--since/--until the service answers the current year.",
    )
    p.add_argument("poll_id")
    p.add_argument("--since", type=_timestamp, help="UNIX seconds or ISO 8601 (UTC if naive)")
    p.add_argument("--until", type=_timestamp, help="UNIX seconds or ISO 8601 (UTC if naive)")
    p.add_argument("--page-size", type=int, help="1..10000 (service default: 1000)")
    p.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    p.add_argument("-o", "--output", type=Path, help="file to write (default: stdout)")
    p.set_defaults(func=cmd_sessions, needs_client=True)

    p = command("history", "the message history of a session")
    p.add_argument("session_id")
    p.set_defaults(func=cmd_history, needs_client=True)

    p = command("polls", "the company's polls (conversations)")
    p.set_defaults(func=cmd_polls, needs_client=True)

    p = command("agents", "the company's active agents")
    p.add_argument("--tag", help="only agents with this tag name")
    p.set_defaults(func=cmd_agents, needs_client=True)

    p = command(
        "update-session",
        "set session variables and continue the conversation",
        "Update the session named by a first-reply webhook's session_external_id.",
    )
    p.add_argument("session_external_id")
    p.add_argument("keys", nargs="*", type=_key_value, metavar="KEY=VALUE")
    p.add_argument("--keys-json", help='variables as a JSON object, e.g. \'{"plan": "gold"}\'')
    p.set_defaults(func=cmd_update_session, needs_client=True)

    p = command(
        "worker",
        "send chunks of bulk runs from a taskiq broker (extra 'workers')",
        "Take chunks of bulk runs from the broker's queue, claim each in the ledger and send "
        "it with the client's send rules, until SIGINT/SIGTERM (the chunks under way are "
        "finished first). Start as many as you like, on any machine that reaches the broker "
        "and the ledger. Producers use campaignkit.workers.BulkWorkers (README, 'Bulk sends "
        "across workers').",
    )
    p.add_argument(
        "--broker",
        required=True,
        help="redis://HOST:PORT/DB (a Redis streams broker), or module:attribute naming a "
        "taskiq broker object of yours (RabbitMQ, NATS, ...)",
    )
    p.add_argument(
        "--journal",
        required=True,
        help="the runs' ledger: a postgresql:// DSN (or an SQLite file, one machine only)",
    )
    p.add_argument("--concurrency", type=_positive_int, default=4, help="chunks at a time (4)")
    p.add_argument("--queue", default="campaignkit", help="Redis stream name (campaignkit)")
    p.add_argument(
        "--claim-ttl",
        type=_positive_float,
        default=DEFAULT_CLAIM_TTL,
        help="seconds after which a claim of a dead worker is reported ambiguous "
        f"({DEFAULT_CLAIM_TTL:g}); longer than any chunk's request can last",
    )
    p.add_argument(
        "--redeliver-after",
        type=_positive_float,
        default=60.0,
        help="Redis: seconds before a message left unacknowledged by a dead worker goes "
        "to another (60); early is safe, a chunk is never claimed twice",
    )
    p.set_defaults(func=cmd_worker, needs_client=False)

    p = command(
        "runs",
        "the runs of a delivery ledger, or one run's counts",
        "List the runs of the ledger, or show RUN's recipients per state (expired claims, "
        "of senders that died, are first reported ambiguous). --export writes RUN's rejected "
        "or ambiguous users as a CSV file that `send` reads, for a deliberate retry.",
    )
    p.add_argument("run", nargs="?", help="a run's name")
    p.add_argument(
        "--journal", required=True, help="the ledger: an SQLite file or a postgresql:// DSN"
    )
    p.add_argument("--export", choices=["rejected", "ambiguous"], help="write these users as CSV")
    p.add_argument("-o", "--output", type=Path, help="CSV file for --export (default: stdout)")
    p.set_defaults(func=cmd_runs, needs_client=False)
    return parser


# -- users files -------------------------------------------------------------------


def _eta(value: Any, where: str) -> int | None:
    if value in (None, ""):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return _timestamp(value)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"{where}.deployment_eta: {exc}") from None
    raise UsageError(f"{where}.deployment_eta: expected UNIX seconds or ISO 8601")


def _csv_path(path: str) -> str:
    return "/dev/stdin" if path == "-" else path


def _csv_users(path: str, name: str) -> list[User]:
    from .bulk import InvalidInput, users_from_csv

    users: list[User] = []
    bad: list[str] = []
    try:
        for item in users_from_csv(_csv_path(path), validate=False):
            if isinstance(item, InvalidInput):
                bad.append(f"line {item.row}: {item.reason}")
            else:
                users.append(item)
    except errors.ValidationError as exc:
        raise UsageError(f"{name}: {_one_line(exc)}") from None
    if bad:
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise UsageError(f"{name}: {'; '.join(bad[:3])}{more}")
    return users


def _user_from_json(item: Any, where: str) -> User:
    if not isinstance(item, dict):
        raise UsageError(f"{where}: expected an object")
    raw_keys = item.get("user_session_keys", [])
    keys: Any
    if isinstance(raw_keys, dict):
        keys = {str(k): str(v) for k, v in raw_keys.items()}
    elif isinstance(raw_keys, list):
        keys = []
        for j, k in enumerate(raw_keys):
            if not isinstance(k, dict) or "key" not in k or "value" not in k:
                raise UsageError(f"{where}.user_session_keys[{j}]: expected {{key, value}}")
            keys.append(SessionKey(k["key"], k["value"]))
    else:
        raise UsageError(f"{where}.user_session_keys: expected an array or an object")
    return User(
        # Kept as given (even if not strings): the client's validation names the path.
        cellphone=item.get("cellphone"),  # type: ignore[arg-type]
        country_code=item.get("country_code"),  # type: ignore[arg-type]
        user_session_keys=keys,
        deployment_eta=_eta(item.get("deployment_eta"), where),
    )


def _check_readable(path: str) -> str:
    """The display name of an input path; a UsageError if it is not a file."""
    if path == "-":
        return "<stdin>"
    if not os.path.isfile(path):
        raise UsageError(f"cannot read {path}: no such file")
    return path


def users_format(path: str, fmt: str | None) -> str:
    if fmt is not None:
        return fmt
    suffix = Path(path).suffix.lower()
    return "json" if suffix in (".json", ".jsonl") else "csv"


def load_users(path: str, fmt: str | None) -> list[User]:
    """Users of a CSV file (the format of :func:`campaignkit.bulk.users_from_csv`),
    a JSON file (array or ``{"users": [...]}``) or a JSON Lines file."""
    name = _check_readable(path)
    if users_format(path, fmt) == "csv":
        try:
            return _csv_users(path, name)
        except OSError as exc:
            raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise UsageError(f"{name} is not UTF-8 text") from None
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text("utf-8-sig")
    except OSError as exc:
        raise UsageError(f"cannot read {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{name} is not UTF-8 text") from None
    try:
        data: Any = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        try:  # JSON Lines
            data = [orjson.loads(line) for line in text.splitlines() if line.strip()]
        except orjson.JSONDecodeError:
            raise UsageError(f"{name}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("users"), list):
        data = data["users"]
    if not isinstance(data, list):
        raise UsageError(f'{name}: expected a JSON array of users or {{"users": [...]}}')
    return [_user_from_json(item, f"{name}: users[{i}]") for i, item in enumerate(data)]


# -- commands --------------------------------------------------------------------------


async def cmd_polls(ctx: Ctx, client: CampaignClient) -> int:
    polls = await client.list_polls()
    if ctx.json:
        ctx.emit(polls)
    else:
        ctx.print(table([(p.id, p.name) for p in polls], ["id", "name"]))
    return 0


async def cmd_agents(ctx: Ctx, client: CampaignClient) -> int:
    agents = await client.list_agents()
    if ctx.args.tag:
        wanted = ctx.args.tag.casefold()
        agents = [a for a in agents if any(t.name.casefold() == wanted for t in a.tags)]
    if ctx.json:
        ctx.emit(agents)
    else:
        rows = [
            (a.id, f"{a.first_name} {a.last_name}", a.email, ", ".join(t.name for t in a.tags))
            for a in agents
        ]
        ctx.print(table(rows, ["id", "name", "email", "tags"]))
    return 0


async def cmd_history(ctx: Ctx, client: CampaignClient) -> int:
    history = await client.get_session_history(ctx.args.session_id)
    if ctx.json:
        ctx.emit(history)
    else:
        ctx.print(format_history(history))
    return 0


def format_history(history: Sequence[Any]) -> str:
    lines = []
    for entry in history:
        m = entry.message
        at = m.created_at.strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{at}  {m.sender:<4}  {m.text}")
    return "\n".join(lines) if lines else "(no messages)"


async def cmd_update_session(ctx: Ctx, client: CampaignClient) -> int:
    keys: dict[str, str] = dict(ctx.args.keys)
    if ctx.args.keys_json:
        try:
            extra = orjson.loads(ctx.args.keys_json)
        except orjson.JSONDecodeError:
            raise UsageError("--keys-json is not valid JSON") from None
        if not isinstance(extra, dict):
            raise UsageError("--keys-json must be a JSON object")
        keys.update(
            {str(k): v if isinstance(v, str) else dumps(v).decode() for k, v in extra.items()}
        )
    if not keys:
        raise UsageError("give at least one KEY=VALUE (or --keys-json)")
    update = await client.update_session(ctx.args.session_external_id, keys)
    if ctx.json:
        ctx.emit(update)
    else:
        ctx.print(f"{update.message} (session {update.session_id})")
    return 0


async def cmd_status(ctx: Ctx, client: CampaignClient) -> int:
    status = await client.get_campaign_status(ctx.args.launch_request_id)
    if ctx.json:
        ctx.emit(status_json(status))
        return 0
    ctx.print(
        f"launch request {status.launch_request_id}: {status.status.value}, poll {status.poll_id}, "
        f"{len(status.deployments)} deployments, {settled(status)} settled"
    )
    if status.deployments:
        ctx.print(status_table(status))
    if ctx.args.deployments:
        ctx.print()
        rows = [(d.cellphone, d.status or "", d.conversation_id) for d in status.deployments]
        ctx.print(table(rows, ["cellphone", "status", "conversation_id"]))
    return 0


async def track_campaign(
    ctx: Ctx,
    client: CampaignClient,
    launch_request_id: str,
    *,
    until: str,
    poll_interval: float = 1.0,
    max_interval: float = 5.0,
    timeout: float | None = None,
    label: str = "tracking",
) -> CampaignStatus:
    """Follow a campaign with a live progress display; the last status read."""
    tracker = client.track(
        launch_request_id,
        until=until,
        poll_interval=poll_interval,
        max_interval=max(max_interval, poll_interval),
        timeout=timeout,
    )
    with Progress(ctx.err, label, enabled=not ctx.args.quiet) as progress:

        def show() -> None:
            p = tracker.progress
            state = tracker.state.value if tracker.state is not None else "..."
            progress.update(p.done, p.total or None, f"{state}  {count_summary(tracker.counts)}")

        async with tracker:
            try:
                async for _change in tracker:
                    show()
            finally:
                show()
    result = tracker.result
    if result is None:  # pragma: no cover - the tracker ends after a poll
        result = await client.get_campaign_status(launch_request_id)
    return result


async def cmd_track(ctx: Ctx, client: CampaignClient) -> int:
    a = ctx.args
    try:
        status = await track_campaign(
            ctx,
            client,
            a.launch_request_id,
            until="settled" if a.settled else "done",
            poll_interval=a.poll_interval,
            max_interval=a.max_interval,
            timeout=a.track_timeout,
        )
    except errors.TimeoutError as exc:
        if exc.last_status is not None and not ctx.json:
            ctx.print(status_table(exc.last_status))
        raise
    report_status(ctx, status)
    return 0


def report_status(ctx: Ctx, status: CampaignStatus) -> None:
    if ctx.json:
        ctx.emit(status_json(status))
    else:
        ctx.print(
            f"{status.status.value}: {len(status.deployments)} deployments, "
            f"{settled(status)} settled"
        )
        ctx.print(status_table(status))


async def cmd_send(ctx: Ctx, client: CampaignClient) -> int:
    a = ctx.args
    if a.bulk:
        return await send_bulk(ctx, client)
    for flag, given in (
        ("--journal", a.journal),
        ("--run", a.run),
        ("--retry-rejected", a.retry_rejected),
    ):
        if given:
            raise UsageError(f"{flag} needs --bulk")
    users = load_users(a.file, a.format)
    if not users:
        raise UsageError(f"{a.file}: no users")
    ack = await client.send_campaign(a.poll_id, users)
    if ctx.json and not a.track:
        ctx.emit(ack)
        return 0
    if not ctx.json:
        ctx.print(f"{ack.message}: {len(users)} users, poll {ack.id}")
        ctx.print(f"launch_request_id: {ack.launch_request_id}")
        ctx.print(f"batch_id:          {ack.batch_id}")
    if not a.track:
        ctx.note(f"follow it with: campaignkit track {ack.launch_request_id}")
        return 0
    status = await track_campaign(ctx, client, ack.launch_request_id, until="done")
    if ctx.json:
        ctx.emit({"ack": plain(ack), "status": plain(status), "counts": counts_json(status)})
    else:
        report_status(ctx, status)
    return 0


def _count_rows(path: str) -> int | None:
    if path == "-":
        return None
    try:
        with open(path, "rb") as f:
            lines = sum(1 for line in f if line.strip())
    except OSError:
        return None
    return max(lines - 1, 0)


def bulk_summary(report: Any) -> dict[str, Any]:
    return {
        "poll_id": report.poll_id,
        "total": report.total,
        "counts": report.counts,
        "complete": report.complete,
        "elapsed": round(report.elapsed, 3),
        "launch_request_ids": report.launch_request_ids,
        "invalid": [
            {"position": i.position, "row": i.row, "reason": i.reason} for i in report.invalid
        ],
        "rejected": [
            {"chunk": c.index, "size": c.size, "error": _one_line(c.error) if c.error else None}
            for c in report.rejected
        ],
        "ambiguous": [
            {"chunk": c.index, "size": c.size, "error": _one_line(c.error) if c.error else None}
            for c in report.ambiguous
        ],
    }


async def send_bulk(ctx: Ctx, client: CampaignClient) -> int:
    from .bulk import users_from_csv

    a = ctx.args
    if (a.run or a.retry_rejected) and not a.journal:
        raise UsageError("--run and --retry-rejected need --journal")
    name = _check_readable(a.file)
    users: Any
    total: int | None
    if users_format(a.file, a.format) == "csv":
        try:
            users = users_from_csv(_csv_path(a.file))
        except errors.ValidationError as exc:
            raise UsageError(f"{name}: {_one_line(exc)}") from None
        total = _count_rows(a.file)
    else:
        users = load_users(a.file, a.format)
        total = len(users)
    with Progress(ctx.err, "sending", enabled=not a.quiet) as progress:

        def on_progress(p: Any) -> None:
            done = p.accepted + p.failed + p.ambiguous + p.invalid + p.duplicates
            detail = f"accepted {p.accepted}"
            for label, n in (
                ("failed", p.failed),
                ("ambiguous", p.ambiguous),
                ("invalid", p.invalid),
                ("duplicate", p.duplicates),
            ):
                if n:
                    detail += f", {label} {n}"
            progress.update(done, max(total or 0, p.validated) or None, detail)

        try:
            report = await client.send_bulk(
                a.poll_id,
                users,
                chunk_size=a.chunk_size,
                concurrency=a.concurrency,
                journal=a.journal,
                run=a.run,
                retry_rejected=a.retry_rejected,
                on_progress=on_progress,
            )
        except errors.ValidationError as exc:
            if any(path.startswith("users") or path == "poll_id" for path, _ in exc.problems):
                raise
            raise UsageError(_one_line(exc)) from None
    summary = bulk_summary(report)
    if ctx.json:
        ctx.emit(summary)
    else:
        counts = report.counts
        ctx.print(table([(k, v) for k, v in counts.items()], ["outcome", "users"]))
        ctx.print(f"{len(report.accepted)} campaign(s) accepted in {report.elapsed:.1f}s")
        for item in report.invalid[:5]:
            where = f"line {item.row}" if item.row else f"input #{item.position + 1}"
            ctx.note(f"invalid: {where}: {item.reason}")
        if len(report.invalid) > 5:
            ctx.note(f"... and {len(report.invalid) - 5} more invalid users")
        for label, chunks in (("rejected", report.rejected), ("ambiguous", report.ambiguous)):
            for c in chunks:
                ctx.note(
                    f"{label}: chunk {c.index} ({c.size} users): "
                    f"{_one_line(c.error) if c.error else ''}"
                )
        if report.ambiguous:
            ctx.note(
                "ambiguous chunks may or may not have reached the service: check "
                "before resending"
                + (
                    " (rerunning with the same --journal reports them again, it never resends them)"
                    if a.journal
                    else ""
                )
            )
        elif report.rejected and a.journal:
            ctx.note(
                "rejected chunks were not sent: rerun with the same --journal and "
                "--retry-rejected to retry them"
            )
    if report.ambiguous:
        return EXIT["ambiguous"]
    if report.rejected or report.invalid:
        return EXIT["partial"]
    return 0


SESSION_CSV_COLUMNS = ("id", "created_at", "finished_at", "country_code", "cellphone")


def _iso(value: datetime | None) -> str:
    return "" if value is None else value.isoformat()


def session_record(s: SessionMeta) -> dict[str, Any]:
    return {
        "id": s.id,
        "created_at": _iso(s.created_at),
        "finished_at": _iso(s.finished_at) or None,
        "user": {"country_code": s.user.country_code, "cellphone": s.user.cellphone},
    }


async def cmd_sessions(ctx: Ctx, client: CampaignClient) -> int:
    a = ctx.args
    if a.page_size is not None and not 1 <= a.page_size <= 10000:
        raise UsageError("--page-size must be between 1 and 10000")
    if a.since is not None and a.until is not None and a.until < a.since:
        raise UsageError("--until is before --since")
    sessions = client.iter_sessions(a.poll_id, start=a.since, end=a.until, page_size=a.page_size)
    if a.output is None:
        count = await write_sessions(ctx, sessions, ctx.out, a.format)
    else:
        tmp = a.output.with_name(a.output.name + ".part")
        try:
            # A CLI's own output file: blocking writes are fine here.
            with open(tmp, "w", encoding="utf-8", newline="") as f:  # noqa: ASYNC230
                count = await write_sessions(ctx, sessions, f, a.format)
            os.replace(tmp, a.output)
        except OSError as exc:
            raise UsageError(f"cannot write {a.output}: {exc.strerror or exc}") from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        ctx.note(f"wrote {count} sessions to {a.output}")
    return 0


async def write_sessions(
    ctx: Ctx, sessions: AsyncIterator[SessionMeta], f: TextIO, fmt: str
) -> int:
    count = 0
    writer = csv.writer(f) if fmt == "csv" else None
    if writer is not None:
        writer.writerow(SESSION_CSV_COLUMNS)
    # Progress goes to stderr; skip it when the data itself goes to the terminal.
    to_terminal = f is ctx.out and bool(getattr(ctx.out, "isatty", lambda: False)())
    progress_on = not ctx.args.quiet and not to_terminal
    with Progress(ctx.err, "sessions", enabled=progress_on) as progress:
        async for s in sessions:
            if writer is not None:
                writer.writerow(
                    (
                        s.id,
                        _iso(s.created_at),
                        _iso(s.finished_at),
                        s.user.country_code,
                        s.user.cellphone,
                    )
                )
            else:
                f.write(orjson.dumps(session_record(s)).decode() + "\n")
            count += 1
            if count % 1000 == 0:
                progress.update(count, None, "exported")
        progress.update(count, None, "exported")
    f.flush()
    return count


async def cmd_sandbox(ctx: Ctx) -> int:
    from .sandbox import Sandbox

    a = ctx.args
    async with Sandbox(
        host=a.host,
        port=a.port,
        speed=a.speed,
        seed=a.seed,
        reply_probability=a.reply_probability,
        legacy_enabled=a.legacy,
    ) as sb:
        ctx.print(f"sandbox listening on {sb.root_url} (speed {a.speed}, seed {a.seed})")
        ctx.print("use it from another shell with:")
        ctx.print(f"  export CAMPAIGNKIT_API_KEY={sb.api_key}")
        ctx.print(f"  export CAMPAIGNKIT_BASE_URL={sb.base_url}")
        ctx.print(f"  export CAMPAIGNKIT_CAMPAIGN_URL={sb.campaign_url}")
        ctx.print(f"  export CAMPAIGNKIT_AGENT_URL={sb.agent_url}")
        ctx.print(f"admin routes: {sb.admin_url}/  (Ctrl-C to stop)")
        await asyncio.Event().wait()
    return 0  # pragma: no cover - ended by Ctrl-C


async def cmd_demo(ctx: Ctx) -> int:
    from ._demo import run_demo

    return await run_demo(ctx)


def open_ledger(journal: str, *, claim_ttl: float | None = None) -> Ledger:
    """The ledger ``--journal`` names (an SQLite file or a ``postgresql://`` DSN)."""
    ledger = ledger_from(journal)
    if claim_ttl is not None:
        ledger.claim_ttl = claim_ttl
    return ledger


async def cmd_worker(ctx: Ctx) -> int:
    from taskiq import TaskiqEvents, TaskiqState

    from .workers import BulkWorkers, broker_from

    a = ctx.args
    client = ctx.client()  # configuration errors now, not at the first chunk
    broker = broker_from(a.broker, queue=a.queue, redeliver_after=a.redeliver_after)
    bulk = BulkWorkers(
        broker, lambda: open_ledger(a.journal, claim_ttl=a.claim_ttl), client=lambda: client
    )
    ledger = open_ledger(a.journal)

    def ready(state: TaskiqState) -> None:
        ctx.note(
            f"campaignkit worker {bulk.owner} ready: {type(broker).__name__}"
            f"{f' queue {a.queue}' if '://' in a.broker else ''}, ledger {ledger!r}, "
            f"concurrency {a.concurrency} (SIGINT/SIGTERM: stop after the chunks under way)"
        )

    broker.add_event_handler(TaskiqEvents.WORKER_STARTUP, ready)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await bulk.work(concurrency=a.concurrency, stop=stop)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    ctx.note("campaignkit worker stopped")
    return 0


def _created(info: RunInfo) -> str:
    return datetime.fromtimestamp(info.created, UTC).isoformat(timespec="seconds")


def _run_json(info: RunInfo, counts: dict[str, int]) -> dict[str, Any]:
    return {
        "run": info.run,
        "poll_id": info.poll,
        "created": _created(info),
        "input_done": info.input_done,
        "total": info.total,
        "counts": counts,
    }


async def cmd_runs(ctx: Ctx) -> int:
    a = ctx.args
    if a.export and not a.run:
        raise UsageError("--export needs a RUN")
    if a.output and not a.export:
        raise UsageError("-o/--output needs --export")
    async with open_ledger(a.journal) as ledger:
        if not a.run:
            runs = [(info, await ledger.counts(info.run)) for info in await ledger.runs()]
            if ctx.json:
                ctx.emit([_run_json(info, counts) for info, counts in runs])
            else:
                ctx.print(
                    table(
                        [
                            (
                                info.run,
                                info.poll,
                                _created(info),
                                "done" if info.input_done else "reading",
                                *counts.values(),
                            )
                            for info, counts in runs
                        ],
                        ["run", "poll", "created", "input", *(runs[0][1] if runs else STATES)],
                    )
                )
            return 0
        info = await ledger.run_info(a.run)
        if info is None:
            raise UsageError(f"no run named {a.run!r} in {ledger!r}")
        await ledger.expire(a.run)
        if a.export:
            return await export_run(ctx, ledger, a.run, a.export, a.output)
        counts = await ledger.counts(a.run)
        if ctx.json:
            ctx.emit(_run_json(info, counts))
        else:
            state = "input read" if info.input_done else "input still being read"
            ctx.print(
                f"run {info.run}: poll {info.poll}, created {_created(info)}, {state}"
                + (f" ({info.total} inputs)" if info.total is not None else "")
            )
            ctx.print(table(list(counts.items()), ["state", "users"]))
    return 0


async def export_run(ctx: Ctx, ledger: Ledger, run: str, state: str, output: Path | None) -> int:
    """Write the run's users in ``state`` as a CSV that ``send`` reads."""
    keys: dict[str, None] = {}
    async for record in ledger.records(run, [state]):
        keys.update(dict.fromkeys(k["key"] for k in _stored(record)["user_session_keys"]))
    columns = ["country_code", "cellphone", "deployment_eta", *keys]

    async def write(f: TextIO) -> int:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        count = 0
        async for record in ledger.records(run, [state]):
            user = _stored(record)
            row = {k["key"]: k["value"] for k in user["user_session_keys"]}
            row.update((name, user.get(name, "")) for name in columns[:3])
            writer.writerow(row)
            count += 1
        f.flush()
        return count

    if output is None:
        count = await write(ctx.out)
    else:
        tmp = output.with_name(output.name + ".part")
        try:
            with open(tmp, "w", encoding="utf-8", newline="") as f:  # noqa: ASYNC230
                count = await write(f)
            os.replace(tmp, output)
        except OSError as exc:
            raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
    advice = (
        "they may have been received: check before sending them again"
        if state == AMBIGUOUS
        else "send them again with `campaignkit send POLL FILE --bulk`"
    )
    ctx.note(
        f"wrote {count} {state} users of run {run}{f' to {output}' if output else ''}: {advice}"
    )
    return 0


def _stored(record: Record) -> dict[str, Any]:
    user: dict[str, Any] = orjson.loads(record.user or "{}")
    return user


# -- running ------------------------------------------------------------------------


def _one_line(exc: BaseException) -> str:
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


def exit_code(exc: BaseException) -> int:
    if isinstance(exc, UsageError | errors.ValidationError):
        return EXIT["usage"]
    if isinstance(exc, errors.ConfigurationError | errors.AuthenticationError):
        return EXIT["config"]
    if isinstance(exc, errors.AmbiguousSendError):
        return EXIT["ambiguous"]
    if isinstance(exc, errors.ConnectionError | errors.TimeoutError):
        return EXIT["network"]
    return EXIT["error"]


class _Redactor:
    def __init__(self, secrets: Iterable[str | None]) -> None:
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


async def _dispatch(ctx: Ctx) -> int:
    func: Callable[..., Any] = ctx.args.func
    if not ctx.args.needs_client:
        return int(await func(ctx))
    async with ctx.client() as client:
        return int(await func(ctx, client))


def run(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the command line ``argv``; the exit code (see the module docs)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else EXIT["usage"]
    for name, default in COMMON_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, default)
    redact = _Redactor([args.api_key, os.environ.get(ENV_API_KEY)])
    ctx = Ctx(args, out, err)
    try:
        return asyncio.run(_dispatch(ctx))
    except KeyboardInterrupt:
        if args.command == "sandbox":  # Ctrl-C is how a sandbox is stopped
            err.write("sandbox stopped\n")
            return EXIT["ok"]
        err.write("campaignkit: interrupted\n")
        return EXIT["interrupted"]
    except Exception as exc:
        if args.debug:
            err.write(redact("".join(traceback.format_exception(exc))))
        err.write(redact(f"campaignkit: error: {_one_line(exc)}") + "\n")
        err.flush()
        return exit_code(exc)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point of the ``campaignkit`` console script."""
    sys.exit(run(argv))
