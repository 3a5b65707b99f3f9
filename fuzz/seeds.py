"""Write a seed corpus of valid answers for the decoder fuzzer."""

from __future__ import annotations

import pathlib
import sys

import orjson

SEEDS = {
    "ack": {
        "message": "ok",
        "id": "1",
        "batch_id": "b",
        "launch_request_id": "L",
        "status_url": "/v2/send-campaign/L",
    },
    "status": {
        "launch_request_id": "L",
        "status": "CLAIMED",
        "poll_id": 1,
        "deployments": [
            {
                "conversation_id": "c",
                "service_id": "s",
                "cellphone": "1",
                "business_scope_id": None,
                "username": None,
                "status": "PUSH_NOTIFATION",
            }
        ],
    },
    "sessions": {
        "results": [
            {
                "id": "s",
                "created_at": "2026-01-01 00:00:00.000001",
                "finished_at": "2026-01-01 00:00:01.000001",
                "user": {"country_code": "+57", "cellphone": "300"},
            }
        ],
        "next_id": "n",
    },
    "history": [
        {
            "type": "MESSAGE",
            "message": {
                "type": "TEXT",
                "sender": "AI",
                "text": "hi",
                "file_url": None,
                "created_at": 1,
                "delivered_at": 2,
                "read_at": None,
                "extra": None,
            },
        }
    ],
    "agents": [
        {
            "id": 1,
            "first_name": "a",
            "last_name": "b",
            "email": "a@b",
            "tags": [{"id": 1, "name": "t"}],
        }
    ],
    "error": {"error": "bad", "message": "no"},
    "detail": {"detail": "Solicitud inválida"},
}

if __name__ == "__main__":
    folder = pathlib.Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    for index, (name, value) in enumerate(SEEDS.items()):
        # The fuzzer reads two selector bytes and a Retry-After before the body.
        (folder / name).write_bytes(bytes([index % 8, index % 10]) + b"\x00" + orjson.dumps(value))
