"""The sample bodies of spec/published-docs.md, one per kind, as published
(the shortened samples completed with the fields its tables list)."""

from __future__ import annotations

from typing import Any

RESPONSE: dict[str, Any] = {
    "country_code": "+57",
    "cellphone": "3161234567",
    "session_id": "1234",
    "conversation_id": "5678",
    "question": {
        "type": "closed",
        "text": "conversation-question-text",
        "answers": [{"text": "answer-text"}],
    },
    "sent_at": "2019-01-01 00:00:00",
    "responded_at": "2019-01-01 00:00:00",
    "sent_text": "text-sent-to-user",
    "actual_response": "Si necesito",
    "classified_answer": {"text": "answer-text"},
    "user_session_keys": [
        {"key": "name", "value": "Juan", "type": None},
        {
            "key": "loc",
            "value": '{"latitude": 4.59, "longitude": -72.03, "address": "Carrera 7"}',
            "type": "location",
        },
    ],
}
TEMPLATE_STATUS: dict[str, Any] = {
    "event_id": "5f8d7e6a5f8d7e6a5f8d7e6a",
    "timestamp": "2024-09-10T12:34:56.789Z",
    "event_type": "hsm.status",
    "status": "APPROVED",
    "name": "welcome_message",
    "affected_conversation_ids": [12345, 67890],
}
_FLAT: dict[str, Any] = {
    "country_code": "+57",
    "cellphone": "3161234567",
    "session_id": "1234",
    "conversation_id": 5678,
    "question": {"type": "open", "text": "conversation-question-text"},
    "sent_at": "2019-01-01 00:00:00",
    "sent_text": "text-sent-to-user",
    "user_session_keys": [],
}
DELIVERED = {**_FLAT, "delivered_at": "2019-01-01 00:00:05.250000"}
READ = {**_FLAT, "read_at": "2019-01-01 00:01:00"}
OPT_OUT = {**_FLAT, "reason": "OPTOUT", "classified_answer": {"text": "STOP"}}
TIMEOUT = {
    "country_code": "+57",
    "cellphone": "3161234567",
    "session_id": "1234",
    "conversation_id": 5678,
    "question": {"type": "open", "text": "conversation-question-text"},
    "timeout_at": "2019-01-02 00:00:00",
}
CONDITION = {
    "country_code": "+57",
    "cellphone": "3161234567",
    "session_id": "1234",
    "conversation_id": 5678,
    "variable": {"name": "age", "value": "30"},
    "condition": {"operator": "GTE", "value": "18"},
    "user_session_keys": [{"key": "age", "value": "30", "type": None}],
}
CONVERSATION_CLOSED: dict[str, Any] = {
    "session": {"external_id": "sess-9", "closed_at": "2019-01-03 10:00:00"},
    "user": {"country_code": "+57", "cellphone": "3161234567"},
    "company": {"id": 7, "cellphone": "15550001"},
    "messages": [
        {
            "sender": "company",
            "type": "hsm",
            "created_at": "2019-01-03 09:00:00",
            "delivered_at": "2019-01-03 09:00:01",
            "read_at": None,
            "hsm": {"name": "welcome_message"},
        },
        {
            "sender": "user",
            "type": "location",
            "created_at": "2019-01-03 09:30:00",
            "delivered_at": None,
            "read_at": None,
            "location": {"latitude": 4.59, "longitude": -72.03},
        },
    ],
    "user_session_keys": [{"key": "name", "value": "Juan", "type": None}],
    "hsm": None,
}
