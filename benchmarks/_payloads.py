"""Wire payloads of realistic shape and size for the benchmarks."""

from __future__ import annotations

from typing import Any

import orjson

from campaignkit.status import DeploymentStatus

STATUSES = [status.value for status in DeploymentStatus]


def deployments(count: int, *, shift: int = 0, changed: float = 0.0) -> list[dict[str, Any]]:
    """``count`` deployment records; a ``changed`` fraction has its status moved on."""
    every = round(1 / changed) if changed else 0
    return [
        {
            "conversation_id": f"conv-{i:08d}-5f0c9b1e",
            "service_id": f"svc-{i:08d}-0a1b2c3d4e",
            "cellphone": f"57300{i:07d}",
            "business_scope_id": None,
            "username": None,
            "status": STATUSES[(i + shift + (1 if every and i % every == 0 else 0)) % 30],
        }
        for i in range(count)
    ]


def campaign_status(count: int, **kwargs: Any) -> bytes:
    """The JSON body of a campaign status answer with ``count`` deployments."""
    return orjson.dumps(
        {
            "launch_request_id": "6f1d3c2a-9a57-4d0e-8a43-1e2b3c4d5e6f",
            "status": "CLAIMED",
            "poll_id": 4242,
            "deployments": deployments(count, **kwargs),
        }
    )


def session_page(count: int, next_id: str) -> bytes:
    """One page of a session listing."""
    return orjson.dumps(
        {
            "results": [
                {
                    "id": f"sess-{i:09d}",
                    "created_at": "2026-03-04 05:06:07.123456",
                    "finished_at": "2026-03-04 05:16:07.654321",
                    "user": {"country_code": "+57", "cellphone": f"300{i:07d}"},
                }
                for i in range(count)
            ],
            "next_id": next_id,
        }
    )
