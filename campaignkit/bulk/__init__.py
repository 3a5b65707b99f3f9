"""Bulk sends: stream any number of users to a poll in chunks, nobody twice.

:func:`send_bulk` reads its input lazily (a bounded queue sits between the
reader and the senders, so at most ``(2 * concurrency + 1) * chunk_size``
users are held at a time), validates each user with the client's own
validation, drops repeated phone numbers, and sends chunks of ``chunk_size``
users with bounded concurrency and the client's send rules: a 429 waits and is
retried, a connect failure before any byte was written is retried, and
anything after which the chunk may have reached the service makes it
*ambiguous*: reported, never resent automatically.

Every input ends in exactly one bucket of the :class:`BulkReport`:

- ``accepted``: the chunk was answered ``202`` (its :class:`CampaignAck` is
  kept, for ``client.track``/``track_many``);
- ``rejected``: the chunk surely did not take effect (a 4xx answer, a 429 or a
  connect failure after every retry, or a fatal answer to an earlier chunk): safe
  to send again. A 401, a 404 or a 400 refusing the request as a whole (not
  naming one of its users) is fatal (``report.fatal``): no request starts
  after it, and the rest of the input is still read and every valid user not
  sent is rejected with it (in the ledger too): the report's ``total`` is the
  input's, and ``retry_rejected=True`` resends them once the cause is fixed;
- ``ambiguous``: the chunk may or may not have reached the service (a 5xx, a
  timeout or a dropped connection after the request was written, or users
  the ledger holds as in flight from a run that stopped): check before resending;
- ``invalid``: the user failed validation (or could not be read), not sent;
- ``duplicate``: the person (the same :class:`~campaignkit.Phone`, however
  the number was written) was already seen earlier in the input, not sent.

Every recipient is filed in a delivery ledger (:mod:`campaignkit.ledger`;
without ``journal=``, a :class:`~campaignkit.ledger.MemoryLedger`) and
claimed before its request leaves: one pipeline whatever the ledger, in
process and across workers (:mod:`campaignkit.workers`) alike: a
:class:`Producer` plans the input into the ledger chunk by chunk and hands
each chunk over, a :class:`ChunkSender` claims, sends and settles it. The
report is the ledger's (``ledger.report(run)``): the whole run's, this
call's own chunks marked not ``resumed``. With a durable ``journal=``, the
claim is committed to disk first, and a rerun of the same run skips whoever
the ledger holds as in flight, accepted or ambiguous, whatever the input
order, the chunk size, or users added or removed. The options are one
value, :class:`BulkOptions` (or its fields as keywords).

Memory: the seen-phone set (about 16 bytes a phone) and the ledger's records
(a memory ledger: about 40 bytes a recipient, see benchmarks/README.md) grow
with the input. The report keeps, per chunk, the input positions of
its users and the ack or error, but the :class:`User` objects only for
rejected and ambiguous chunks (the ones a caller may retry), and for invalid
and duplicate inputs. Accepted chunks drop their users unless
``keep_accepted_users=True``: ``report.users_for("accepted")`` needs it.
"""

from typing import TYPE_CHECKING

from .._deprecated import renamed
from .._input.csv_files import ausers_from_csv, users_from_csv
from .._input.users import InvalidInput
from .._report import (
    OUTCOMES,
    BulkChunk,
    BulkReport,
    DuplicateUser,
    InvalidUser,
    Outcome,
    SuppressedUser,
)
from ..progress import ProgressUpdate
from ._canary import workers_canary
from ._follow import DEFAULT_FOLLOW_CONCURRENCY, follow_problems, follow_run
from ._options import (
    DEFAULT_CHUNK_SIZE,
    BulkOptions,
    BulkOptionsDict,
    JournalPath,
    ProgressCallback,
    bulk_problems,
    checked_options,
)
from ._pacing import PROGRESS_INTERVAL
from ._pipeline import ChunkSender, Handed, HandOver, Producer, Sent, worker_name
from ._planner import PlannedChunk, Planner
from ._rules import SendRules, TzFor, rules_problems, zone_deferral, zone_preparer
from ._send import UserInput, default_run, send_bulk
from ._sender import ClaimOutcome, reject_unsent, send_claim
from ._stopping import DEFAULT_INTERRUPT_GRACE
from ._watch import FollowingRun
from ._windows import SendWindow, zone_named

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_INTERRUPT_GRACE",
    "DEFAULT_FOLLOW_CONCURRENCY",
    "OUTCOMES",
    "PROGRESS_INTERVAL",
    "BulkChunk",
    "BulkOptions",
    "BulkOptionsDict",
    "BulkReport",
    "ChunkSender",
    "ClaimOutcome",
    "DuplicateUser",
    "FollowingRun",
    "HandOver",
    "Handed",
    "InvalidInput",
    "InvalidUser",
    "JournalPath",
    "Outcome",
    "PlannedChunk",
    "Planner",
    "ProgressCallback",
    "Producer",
    "SendRules",
    "SendWindow",
    "Sent",
    "SuppressedUser",
    "TzFor",
    "UserInput",
    "ausers_from_csv",
    "bulk_problems",
    "checked_options",
    "default_run",
    "follow_problems",
    "follow_run",
    "reject_unsent",
    "rules_problems",
    "send_bulk",
    "send_claim",
    "users_from_csv",
    "workers_canary",
    "worker_name",
    "zone_deferral",
    "zone_named",
    "zone_preparer",
]

if TYPE_CHECKING:
    BulkProgress = ProgressUpdate
else:
    __getattr__ = renamed(
        __name__, {"BulkProgress": ("campaignkit.ProgressUpdate", ProgressUpdate)}
    )
