"""What the opt-in body logging (``CampaignClient(log_bodies=True)`` and the
``campaignkit`` logger at DEBUG) shows of a body: phone numbers masked, the
API key redacted, at most :data:`LIMIT` characters."""

from __future__ import annotations

import re
from typing import Any

import orjson

from .._redaction import redact

LIMIT = 4000
# A number as people write it: 7 or more digits with spaces, dashes, brackets.
_WRITTEN = re.compile(r"\+?[0-9][0-9 ()-]{5,}[0-9]")
# Inside other text (DS_<phone>, a message): a run of 7 to 15 digits.
_RUN = re.compile(r"(?<![A-Za-z0-9.:/])\+?[0-9]{7,15}(?![0-9.:/])")


def _mask_digits(match: re.Match[str]) -> str:
    """All digits but the last two hidden: enough to tell two numbers apart."""
    text = match.group()
    shown = len(text) - 2
    return re.sub(r"[0-9]", "*", text[:shown]) + text[shown:]


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        # Phones travel as strings (ids and timestamps as numbers).
        if _WRITTEN.fullmatch(value):
            return _WRITTEN.sub(_mask_digits, value)
        return _RUN.sub(_mask_digits, value)
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return value


def loggable_body(body: bytes | None) -> str:
    """``body`` for a debug line, the key redacted. In JSON, strings that are
    phone numbers and runs of 7+ digits inside strings are masked (numbers,
    such as ids and timestamps, are not); in any other body, every number of
    7 or more digits as people write them."""
    if not body:
        return "-"
    try:
        text = orjson.dumps(_masked(orjson.loads(body))).decode()
    except orjson.JSONDecodeError:
        text = _WRITTEN.sub(_mask_digits, body.decode("utf-8", "replace"))
    if len(text) > LIMIT:
        text = f"{text[:LIMIT]}... ({len(text) - LIMIT} more characters)"
    return redact(text)
