"""Sending one request of a bulk send with the client's send rules, and
settling its claim in the ledger."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from typing import Literal

import attrs
import orjson

from .._backoff import reconnecting
from .._input.users import as_user
from .._io import telemetry
from .._io.unsent import cancelled_unsent, note_unsent
from .._redaction import sdk_logger
from .._wire import sansio as wire
from ..errors import (
    AmbiguousSendError,
    AuthenticationError,
    BadRequestError,
    CampaignKitError,
    NotFoundError,
    ResponseError,
)
from ..ledger import (
    ACCEPTED,
    AMBIGUOUS,
    REJECTED,
    Claim,
    Ledger,
    LedgerUnavailable,
    error_detail,
)
from ..models import CampaignAck, User
from ._rules import NO_RULES, SendRules, request_body, utc_now
from ._seam import BulkClient

_DECODE_ACK = wire.decoder(CampaignAck)
log = sdk_logger("campaignkit.bulk")

_LEDGER_STATE = {"accepted": ACCEPTED, "rejected": REJECTED, "ambiguous": AMBIGUOUS}


@attrs.frozen
class ClaimOutcome:
    """What became of one request: ``accepted`` (with its ack), ``rejected``
    (surely not taken) or ``ambiguous`` (may have reached the service)."""

    outcome: Literal["accepted", "rejected", "ambiguous"]
    ack: CampaignAck | None = None
    error: CampaignKitError | None = None


async def send_request(
    client: BulkClient,
    segment: str,
    body: bytes,
    users: Sequence[User],
    *,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> ClaimOutcome:
    """POST one campaign request (``body`` is its JSON) and classify the result."""
    request = wire.build_request(
        client.config,
        wire.SEND_CAMPAIGN,
        path_params={"poll_id": segment},
        json=orjson.Fragment(body),
        users=tuple(users),
    )
    try:
        ack = await client.transport.call(
            request, _DECODE_ACK, timeout=timeout, max_retries=max_retries
        )
        result = ClaimOutcome("accepted", ack=ack)
    except (AmbiguousSendError, ResponseError) as exc:
        # A 202 whose acknowledgement cannot be read was taken: never resend it.
        result = ClaimOutcome("ambiguous", error=exc)
    except CampaignKitError as exc:
        result = ClaimOutcome("rejected", error=exc)
    telemetry.users_sent(result.outcome, len(users))
    return result


# A 400 naming one user of the request (the sandbox says "users[3].country_code
# must start with +") is that request's; any other 400 (the spec's "the poll id
# is required", a body the service cannot read) would refuse every request alike.
_NAMES_A_USER = re.compile(r"\busers\[\d+\]")


def is_fatal(error: CampaignKitError | None) -> bool:
    """Whether ``error`` would refuse every request of the run alike: a 401,
    a 404 for the poll, or a 400 that refuses the request as a whole (not
    one naming a user of it)."""
    if isinstance(error, AuthenticationError | NotFoundError):
        return True
    if isinstance(error, BadRequestError):
        said = " ".join(filter(None, (error.detail, error.error, error.message))) or error.body
        return _NAMES_A_USER.search(said) is None
    return False


async def send_claim(
    client: BulkClient,
    ledger: Ledger,
    run: str,
    segment: str,
    claim: Claim,
    *,
    users: Sequence[User] | None = None,
    rules: SendRules = NO_RULES,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> ClaimOutcome:
    """Send the recipients of ``claim`` (already committed) and settle it.

    Cancelled while waiting for the answer, the claim is settled ambiguous
    (the request may have reached the service) before the cancellation goes on;
    cancelled before the request left or while waiting to retry it (after a
    429), it is released: its recipients were surely not sent, and are
    planned again.
    ``users`` are the claim's users in its order, when the caller has them;
    otherwise they are read back from the ledger's copy (for errors' ``users``).
    ``rules`` (the run's send window and lines) are applied now, just before
    the request leaves: a run resumed days later is sent by the clock of then.
    A fatal answer is recorded on the run (``Ledger.stop_run``).
    """
    if users is None:
        users = [_stored_user(recipient.user) for recipient in claim.recipients]
    try:
        body = await request_body(ledger, claim, rules, utc_now())
    except CampaignKitError as exc:  # the ledger failed to give lines: nothing left
        result = ClaimOutcome("rejected", error=exc)
    except asyncio.CancelledError as cancelled:
        note_unsent(cancelled)  # stopped before the request was built
        await release_claim(ledger, run, claim.token)
        raise
    else:
        try:
            result = await send_request(
                client, segment, body, users, timeout=timeout, max_retries=max_retries
            )
        except asyncio.CancelledError as cancelled:
            if cancelled_unsent(cancelled):
                # Stopped while waiting to retry a request refused without effect: never sent.
                await release_claim(ledger, run, claim.token)
                raise
            # Stopped before the answer came: the request may have reached the service.
            error = AmbiguousSendError(
                "interrupted before the service answered: the request may have reached it",
                users=users,
                cause=cancelled,
            )
            await settle_claim(ledger, run, claim, ClaimOutcome("ambiguous", error=error))
            raise
    await settle_claim(ledger, run, claim, result)
    if result.error is not None and is_fatal(result.error):
        await ledger.stop_run(run, error_detail(result.error))  # for every sender of the run
    return result


async def reject_unsent(
    ledger: Ledger, run: str, claim: Claim, fatal: CampaignKitError
) -> ClaimOutcome:
    """File the recipients of ``claim`` rejected with ``fatal``, the answer that
    ended the run, without sending them: every sender and producer of a
    stopped run accounts for the rest of it so (``retry_rejected`` resends them)."""
    result = ClaimOutcome("rejected", error=fatal)
    await settle_claim(ledger, run, claim, result)
    return result


async def settle_claim(ledger: Ledger, run: str, claim: Claim, result: ClaimOutcome) -> None:
    """Record ``result`` as the outcome of ``claim``.

    The ledger lost for longer than its ``reconnect_timeout``, the settle is
    tried again (jittered backoff, one warning per attempt) until the claim
    expires: its recipients are reported ambiguous then anyway, and
    ``LedgerUnavailable`` is raised. A cancellation must not lose an outcome
    the service gave: cancelled meanwhile, the settle goes on and the
    cancellation waits for it (until the claim expires, plus the ledger's
    last wait, at the most) before it goes on; cancelled again, it stops
    waiting and leaves the settle running.
    """
    settling = asyncio.ensure_future(_settle_until_expiry(ledger, run, claim, result))
    try:
        await asyncio.shield(settling)
    except asyncio.CancelledError:
        await asyncio.wait({settling})
        raise


async def _settle_until_expiry(
    ledger: Ledger, run: str, claim: Claim, result: ClaimOutcome
) -> None:
    """``ledger.settle``, run again while the ledger stays lost, until ``claim`` expires."""
    retrying = reconnecting(
        LedgerUnavailable,
        lambda state: time.time() >= claim.expires,
        lambda lost, delay, attempt: log.warning(
            "%s: settling claim %s of run %s (%s) again in %.1f s (attempt %d)",
            *(lost, claim.token, run, result.outcome, delay, attempt),
        ),
    )
    try:
        await retrying(
            ledger.settle,
            run,
            claim.token,
            _LEDGER_STATE[result.outcome],
            launch_request_id=None if result.ack is None else result.ack.launch_request_id,
            ack=None if result.ack is None else orjson.dumps(attrs.asdict(result.ack)).decode(),
            detail=None if result.error is None else error_detail(result.error),
        )
    except LedgerUnavailable as lost:
        log.warning(
            "%s: claim %s of run %s (%s) expired before it was settled (attempt %d)",
            *(lost, claim.token, run, result.outcome, retrying.statistics["attempt_number"]),
        )
        raise


async def release_claim(ledger: Ledger, run: str, token: str) -> None:
    """Plan the recipients of the claim ``token`` again: its request never left."""
    # Shielded: the cancellation that stopped the request must not strand them in flight.
    await asyncio.shield(ledger.release(run, token))


def _stored_user(text: str) -> User:
    user, _ = as_user(orjson.loads(text))
    assert user is not None, "the ledger holds only users that passed validation"
    return user
