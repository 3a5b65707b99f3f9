"""Rows 1 and 8: decoding a 100,000-deployment campaign status, and the memory
the decoded ``CampaignStatus`` holds, against orjson's dicts of the same bytes."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import orjson

from campaignkit._wire import sansio as wire
from campaignkit.models import CampaignStatus

from ._harness import Row, ab_sync, time_ratio
from ._payloads import campaign_status

DECODE = wire.decoder(CampaignStatus)
HEADERS = {"Content-Type": "application/json"}


def held_bytes(build: Callable[[], object]) -> int:
    """Bytes still allocated after ``build()`` while its result is alive."""
    gc.collect()
    tracemalloc.start()
    try:
        result = build()
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return held


def run(quick: bool) -> list[Row]:
    count = 2_000 if quick else 100_000
    body = campaign_status(count)
    floor, sdk = ab_sync(
        lambda: orjson.loads(body), lambda: DECODE(body, 200, HEADERS), 3 if quick else 9
    )
    dicts = held_bytes(lambda: orjson.loads(body))
    models = held_bytes(lambda: DECODE(body, 200, HEADERS))
    megabytes = {"body_mb": round(len(body) / 1e6, 1)}
    return [
        time_ratio(
            f"1 decode CampaignStatus ({count:,} deployments)", floor, sdk, 0.6, figures=megabytes
        ),
        Row(
            f"8 memory of CampaignStatus ({count:,})",
            models / dicts,
            0.7,
            notes=f"({models / 1e6:.1f} MB vs {dicts / 1e6:.1f} MB of dicts)",
            figures={"models_mb": models / 1e6, "dicts_mb": dicts / 1e6},
        ),
    ]
