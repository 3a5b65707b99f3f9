"""What every command shares: its context, its exit status, its usage error."""

from __future__ import annotations

import argparse
import enum
import importlib
from typing import Any, Protocol, TextIO

import attrs

from .. import errors
from .._redaction import redact
from ..client import CampaignClient
from ..config import RetryPolicy
from ..ledger import LedgerNotFound
from .output import dumps

# Kept here, not in a docstring: ``python -OO`` strips docstrings, not --help.
EPILOG = """\
Exit codes:
  0    success
  1    the service answered with an error, or its answer could not be read
  2    usage: bad flags, bad input file, invalid users or arguments
  3    configuration or authentication: no API key, bad URL, 401
  4    ambiguous send: the request may or may not have reached the service
       (nobody was sent again; the lines above it give the command that
       lists who was reached, and the one that resends knowingly)
  5    network: connection failure, or a timeout (including `track --track-timeout`)
  6    bulk send finished, but some users were not sent (invalid or failed chunks)
  7    no such ledger: --journal names a ledger that does not exist (`worker`,
       `runs`, `suppress`, `report`, `dashboard`, `submit` without --create);
       nothing was created
  130  interrupted (Ctrl-C)
"""


class ExitStatus(enum.IntEnum):
    """The documented exit codes (EPILOG); their numbers are a contract."""

    OK = 0
    ERROR = 1
    USAGE = 2
    CONFIG = 3
    AMBIGUOUS = 4
    NETWORK = 5
    PARTIAL = 6
    NO_LEDGER = 7
    INTERRUPTED = 130


class UsageError(Exception):
    """A mistake on the command line or in an input file (exit 2)."""


def exit_status(exc: BaseException) -> ExitStatus:
    if isinstance(exc, LedgerNotFound):
        return ExitStatus.NO_LEDGER
    if isinstance(exc, UsageError | errors.ValidationError):
        return ExitStatus.USAGE
    if isinstance(exc, errors.ConfigurationError | errors.AuthenticationError):
        return ExitStatus.CONFIG
    if isinstance(exc, errors.AmbiguousSendError):
        return ExitStatus.AMBIGUOUS
    if isinstance(exc, errors.ConnectionError | errors.TimeoutError):
        return ExitStatus.NETWORK
    return ExitStatus.ERROR


class AddCommand(Protocol):
    """How a command module adds its subcommand (see ``parser.build_parser``)."""

    def __call__(
        self, name: str, help: str, description: str | None = None
    ) -> argparse.ArgumentParser: ...


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
        print(redact(text), file=self.out, flush=True)

    def note(self, text: str) -> None:
        """Remarks for a person: on stderr, so stdout stays data."""
        if not self.args.quiet:
            print(redact(text), file=self.err, flush=True)

    def emit(self, data: Any) -> None:
        self.out.write(redact(dumps(data).decode()) + "\n")
        self.out.flush()

    def client(self) -> CampaignClient:
        a = self.args
        return CampaignClient(
            a.api_key,
            base_url=a.base_url,
            campaign_url=a.campaign_url,
            agent_url=a.agent_url,
            timeout=a.timeout,
            max_retries=a.max_retries,
            retry=None if a.resend_after_429 else RetryPolicy(resend_after_429=False),
        )


def require_workers(command: str) -> None:
    """A ConfigurationError naming the extra when it is not installed."""
    try:
        for module in ("taskiq", "campaignkit.workers"):  # the first names what is missing
            importlib.import_module(module)
    except ImportError as exc:
        raise errors.ConfigurationError(
            f"campaignkit {command} needs the 'workers' extra (taskiq, taskiq-redis, asyncpg): "
            f"pip install 'campaignkit[workers]' ({exc})"
        ) from exc
