"""The webhooks the sandbox POSTs, in the service's published shapes.

A company (or one of its polls) attaches a URL per event kind and static
headers, as a customer does on the service. Each call is recorded; a ``200``
answer's ``user_session_keys`` are merged into the session; the service waits
10 s for an answer, and so does the sandbox.
"""

from __future__ import annotations

import time
from typing import Any, Literal, get_args

import aiohttp
import attrs
import orjson

from .._redaction import sdk_logger
from ._sessions import US, SessionRecord, format_time, iso_time

__all__ = [
    "KINDS",
    "TEMPLATE_STATUSES",
    "TemplateState",
    "WebhookTargets",
    "Webhooks",
    "closed_event",
    "flat_event",
    "template_status_event",
]

log = sdk_logger("campaignkit.sandbox")

KINDS = ("response", "delivered", "read", "opt_out", "conversation_closed", "template_status")
"""The kinds of calls the sandbox makes (``EventKind`` values)."""

TemplateState = Literal["APPROVED", "REJECTED", "PAUSED", "DISABLED", "PENDING_DELETION"]
"""The statuses the published template (HSM) status event carries."""
TEMPLATE_STATUSES: tuple[str, ...] = get_args(TemplateState)

JSON = dict[str, Any]


@attrs.define
class WebhookTargets:
    """Where each kind of call goes, and the static headers sent with each."""

    urls: dict[str, str] = attrs.Factory(dict)
    headers: dict[str, str] = attrs.Factory(dict)

    def to_json(self) -> JSON:
        return {"urls": dict(self.urls), "headers": dict(self.headers)}


def _time(seconds: float) -> str:
    return format_time(int(seconds * US))


def _keys(record: SessionRecord) -> list[JSON]:
    return [{"key": k, "value": v, "type": record.types.get(k)} for k, v in record.keys.items()]


def flat_event(
    kind: str, record: SessionRecord, question: str, sent_at: float, at: float, text: str = ""
) -> JSON:
    """A flat event (``response``, ``delivered``, ``read``, ``opt_out``) as published."""
    body: JSON = {
        "country_code": record.country_code,
        "cellphone": record.cellphone,
        "session_id": record.id,
        "conversation_id": record.conversation_id,
        "question": {"type": "open", "text": question},
        "sent_at": _time(sent_at),
        "sent_text": question,
        "user_session_keys": _keys(record),
    }
    if kind == "response":
        body["question"]["answers"] = []
        body |= {
            "responded_at": _time(at),
            "actual_response": text,
            "classified_answer": {"text": text},
        }
    elif kind == "opt_out":
        body |= {"reason": "OPTOUT", "classified_answer": {"text": text or "STOP"}}
    else:
        body[f"{kind}_at"] = _time(at)
    return body


def closed_event(record: SessionRecord, company_number: int, line: str | None, at: float) -> JSON:
    """The conversation-closed account event: nested, messages included."""
    messages = []
    for entry in record.history:
        message = entry["message"]
        messages.append(
            {
                "sender": "user" if message["sender"] == "USER" else "company",
                "type": "text",
                "created_at": _time(message["created_at"]),
                "delivered_at": message["delivered_at"] and _time(message["delivered_at"]),
                "read_at": message["read_at"] and _time(message["read_at"]),
                "text": {"body": message["text"]},
            }
        )
    return {
        "session": {"external_id": record.id, "closed_at": _time(at)},
        "user": {"country_code": record.country_code, "cellphone": record.cellphone},
        "company": {"id": company_number, "cellphone": line},
        "messages": messages,
        "user_session_keys": _keys(record),
        "hsm": None,
    }


def template_status_event(
    event_id: str, at: float, status: str, name: str, affected_conversation_ids: list[int]
) -> JSON:
    """The template (HSM) status account event, field for field as published.

    The published body has no reason field (why a template was paused or
    disabled) and no company or line: the sandbox sends none.
    """
    return {
        "event_id": event_id,
        "timestamp": iso_time(at),
        "event_type": "hsm.status",
        "status": status,
        "name": name,
        "affected_conversation_ids": affected_conversation_ids,
    }


def answered_keys(answer: Any) -> tuple[dict[str, str], dict[str, str]]:
    """The ``user_session_keys`` of a 200 answer the service merges (others
    ignored): their values, and the types of those given one (a string)."""
    keys = answer.get("user_session_keys") if isinstance(answer, dict) else None
    if isinstance(keys, dict):
        keys = [{"key": k, "value": v} for k, v in keys.items()]
    if not isinstance(keys, list):
        return {}, {}
    items = [
        item
        for item in keys
        if isinstance(item, dict)
        and isinstance(item.get("key"), str)
        and isinstance(item.get("value"), str)
    ]
    types = {item["key"]: item.get("type") for item in items}  # the last of a key wins
    return (
        {item["key"]: item["value"] for item in items},
        {key: kind for key, kind in types.items() if isinstance(kind, str)},
    )


class Webhooks:
    """POSTs calls and records them (``log``: the company's call list)."""

    def __init__(self, timeout: float) -> None:
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=self._timeout)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def post(
        self, targets: WebhookTargets, kind: str, payload: JSON, log_to: list[JSON]
    ) -> JSON | None:
        """POST ``payload`` to the kind's URL (None: no URL for it); the
        recorded call, with ``keys`` (and their ``types``): what a 200 answer
        asks to merge."""
        url = targets.urls.get(kind)
        if url is None or self._session is None:
            return None
        entry: JSON = {
            "kind": kind,
            "url": url,
            "payload": payload,
            "status": None,
            "answer": None,
            "keys": {},
            "types": {},
            "error": None,
            "seconds": None,
        }
        log_to.append(entry)
        started = time.monotonic()
        headers = {**targets.headers, "Content-Type": "application/json"}
        try:
            async with self._session.post(
                url, data=orjson.dumps(payload), headers=headers
            ) as response:
                entry["status"] = response.status
                body = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            log.warning("webhook %s %s failed: %s", kind, url, entry["error"])
        else:
            try:
                entry["answer"] = orjson.loads(body) if body else None
            except orjson.JSONDecodeError:
                entry["answer"] = None
            if response.status == 200:
                entry["keys"], entry["types"] = answered_keys(entry["answer"])
        entry["seconds"] = round(time.monotonic() - started, 3)
        return entry
