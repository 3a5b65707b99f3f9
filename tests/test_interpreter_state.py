"""No module of the package toggles the cyclic GC or touches other
interpreter-wide state (issue 21): speed comes from building less, not from
pausing the collector under the application's feet."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from campaignkit._wire import sansio as wire
from campaignkit.models import CampaignStatus, SessionPage

ROOT = Path(__file__).resolve().parents[1] / "campaignkit"

# Calls that change state the whole process shares.
FORBIDDEN = {
    "gc": {"disable", "enable", "freeze", "unfreeze", "set_threshold", "set_debug"},
    "sys": {
        "setswitchinterval",
        "setrecursionlimit",
        "settrace",
        "setprofile",
        "set_int_max_str_digits",
        "setdlopenflags",
        "set_asyncgen_hooks",
        "set_coroutine_origin_tracking_depth",
    },
    "threading": {"settrace", "setprofile", "stack_size"},
    "faulthandler": {"enable", "disable"},
    "tracemalloc": {"start", "stop"},
}


def forbidden_uses(source: str) -> Iterator[str]:
    """``module.name`` for every forbidden name read from ``source``, through
    ``import module`` (``gc.disable``) or ``from module import name``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.attr in FORBIDDEN.get(node.value.id, ()):
                yield f"{node.value.id}.{node.attr}"
        elif isinstance(node, ast.ImportFrom) and node.module in FORBIDDEN:
            for alias in node.names:
                if alias.name in FORBIDDEN[node.module]:
                    yield f"{node.module}.{alias.name}"


def test_the_scan_finds_each_way_of_writing_it() -> None:
    source = "import gc\ngc.disable()\nfrom sys import setswitchinterval\nf = gc.freeze\n"
    assert sorted(forbidden_uses(source)) == ["gc.disable", "gc.freeze", "sys.setswitchinterval"]
    assert list(forbidden_uses("import gc\ngc.collect()\ngc.isenabled()\n")) == []


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_touches_interpreter_wide_state(path: Path) -> None:
    assert list(forbidden_uses(path.read_text(encoding="utf-8"))) == []


def _status(count: int) -> bytes:
    entry = {"conversation_id": "c", "service_id": "s", "cellphone": "1", "status": "DELIVERED"}
    body = {"launch_request_id": "l", "status": "DONE", "poll_id": 1}
    return orjson.dumps({**body, "deployments": [entry] * count})


def _page(count: int) -> bytes:
    session = {
        "id": "s",
        "created_at": "2026-03-04 05:06:07.123456",
        "finished_at": None,
        "user": {"country_code": "+57", "cellphone": "3001234567"},
    }
    return orjson.dumps({"results": [session] * count, "next_id": "n"})


def test_large_decodes_leave_the_gc_running() -> None:
    # Collections seen while decoding show the collector was never paused;
    # a pause switched back on afterwards would show no collection at all.
    # A low threshold makes the decodes' own tracked allocations start
    # collections: with the default one, whether any falls inside them
    # depends on what ran before (the decoded models are not tracked).
    collections: list[bool] = []
    decoding = False

    def seen(phase: str, _: dict[str, Any]) -> None:
        if phase == "start" and decoding:
            collections.append(gc.isenabled())

    assert gc.isenabled()
    thresholds = gc.get_threshold()
    status_body, page_body = _status(20_000), _page(20_000)
    gc.set_threshold(10)
    gc.callbacks.append(seen)
    try:
        decoding = True
        status = wire.decoder(CampaignStatus)(status_body, 200, {})
        page = wire.decoder(SessionPage)(page_body, 200, {})
        decoding = False
        held = [*status.deployments, *page.results]  # models kept: the GC has work
        assert len(held) == 40_000
        assert gc.get_threshold()[0] == 10
    finally:
        gc.callbacks.remove(seen)
        gc.set_threshold(*thresholds)
    assert collections
    assert all(collections)
    assert gc.isenabled()
