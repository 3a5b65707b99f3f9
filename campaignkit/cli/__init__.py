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
exit status (:class:`ExitStatus`, listed by ``campaignkit --help``);
``--debug`` adds the traceback.

Layout: ``parser`` (global options, one subcommand per command module),
``context`` (what commands share: ``Ctx``, ``ExitStatus``, ``UsageError``),
``output``, ``input`` (users files), ``core`` (running a command line), and
a module per command group: ``send``, ``track``, ``sessions``, ``polls``,
``runs``, ``sandbox``, ``demo``.
"""

from __future__ import annotations

from .context import ExitStatus
from .core import main, run

__all__ = ["EXIT", "ExitStatus", "main", "run"]

EXIT = {status.name.lower(): int(status) for status in ExitStatus}
"""The exit statuses by name (``EXIT["usage"] == 2``); see :class:`ExitStatus`."""
