"""OpenTelemetry: a client span per HTTP exchange, counters for polls, changes,
bulk users and retries, read with the SDK's in-memory exporters; nothing of it
without the package."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from helpers.exchange import ScriptedExchange
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from campaignkit import CampaignClient, User
from campaignkit._io import telemetry
from campaignkit.errors import ServerError
from campaignkit.testing import FakeTime

pytestmark = pytest.mark.timeout(30)

KEY = "sk_tst_otel_secret_0123456789"
BASE = "http://main.test"
CAMPAIGN = "http://campaign.test"
_SPANS = InMemorySpanExporter()
_METRICS = InMemoryMetricReader()


@pytest.fixture(scope="module", autouse=True)
def _providers() -> None:
    # The global providers can be set once per process: whichever test module
    # comes first sets them, campaignkit's proxies follow.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_SPANS))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[_METRICS]))
    telemetry.recheck()  # an earlier test's call may have found no provider


@pytest.fixture
def exchange() -> ScriptedExchange:
    _SPANS.clear()
    return ScriptedExchange()


@pytest.fixture
async def client(exchange: ScriptedExchange) -> AsyncIterator[CampaignClient]:
    async with FakeTime().install(
        CampaignClient(KEY, base_url=BASE, campaign_url=CAMPAIGN, agent_url=BASE, exchange=exchange)
    ) as c:
        yield c


def counter(name: str) -> dict[tuple[tuple[str, Any], ...], int]:
    """The counter's sums by attributes (cumulative since the process began)."""
    data = _METRICS.get_metrics_data()
    sums: dict[tuple[tuple[str, Any], ...], int] = {}
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        assert isinstance(point, NumberDataPoint)
                        attributes = sorted((point.attributes or {}).items())
                        sums[tuple(attributes)] = int(point.value)
    return sums


async def test_each_exchange_is_a_client_span_without_secrets(
    client: CampaignClient, exchange: ScriptedExchange
) -> None:
    exchange.get(f"{BASE}/poll/api/all", status=503, payload={"error": "busy"})
    exchange.get(f"{BASE}/poll/api/all", payload=[])
    before = counter("campaignkit.client.retries")
    assert await client.list_polls() == []
    spans = _SPANS.get_finished_spans()
    assert [span.name for span in spans] == ["GET /poll/api/all"] * 2
    assert [span.kind for span in spans] == [trace.SpanKind.CLIENT] * 2
    first, second = (dict(span.attributes or {}) for span in spans)
    assert first == {
        "http.request.method": "GET",
        "url.template": "/poll/api/all",
        "campaignkit.endpoint": "list_polls",
        "campaignkit.attempt": 1,
        "http.response.status_code": 503,
    }
    assert second["campaignkit.attempt"] == 2
    assert second["http.response.status_code"] == 200
    assert spans[0].status.status_code == trace.StatusCode.ERROR
    assert spans[1].status.status_code == trace.StatusCode.UNSET
    after = counter("campaignkit.client.retries")
    key = (("campaignkit.endpoint", "list_polls"),)
    assert after[key] - before.get(key, 0) == 1


async def test_a_send_span_holds_no_phone_and_bulk_users_are_counted(
    client: CampaignClient, exchange: ScriptedExchange
) -> None:
    ack = {
        "message": "queued",
        "id": "7",
        "batch_id": "b",
        "launch_request_id": "lr",
        "status_url": "/v2/send-campaign/lr",
    }
    url = f"{CAMPAIGN}/v2/send-campaign/7"
    exchange.post(url, status=202, payload=ack)
    exchange.post(url, status=400, payload={"detail": "bad"})
    before = counter("campaignkit.bulk.users")
    users = [User(cellphone=f"555000{i:04d}", country_code="+1") for i in range(4)]
    report = await client.send_bulk(7, users, chunk_size=2, concurrency=1)
    assert report.counts["accepted"] == 2
    assert report.counts["rejected"] == 2
    after = counter("campaignkit.bulk.users")
    for outcome in ("accepted", "rejected"):
        key = (("outcome", outcome),)
        assert after[key] - before.get(key, 0) == 2
    spans = _SPANS.get_finished_spans()
    assert [span.name for span in spans] == ["POST /v2/send-campaign/{poll_id}"] * 2
    text = repr([(span.attributes, span.events, span.status) for span in spans])
    for secret in (KEY, "5550000000", "campaign.test"):
        assert secret not in text


async def test_a_transport_failure_marks_the_span(
    client: CampaignClient, exchange: ScriptedExchange
) -> None:
    exchange.get(f"{BASE}/poll/api/all", status=500, payload={"error": "down"}, repeat=True)
    with pytest.raises(ServerError):
        await client.list_polls(max_retries=0)
    (span,) = _SPANS.get_finished_spans()
    assert span.status.status_code == trace.StatusCode.ERROR
    assert dict(span.attributes or {})["http.response.status_code"] == 500


def test_without_opentelemetry_nothing_is_imported_and_calls_work() -> None:
    script = """
import asyncio, sys
sys.modules["opentelemetry"] = None  # as if the extra were not installed
from campaignkit.sandbox import Sandbox

async def main():
    async with Sandbox() as sb, sb.client() as client:
        assert await client.list_polls()

asyncio.run(main())
from campaignkit._io import telemetry
assert telemetry.tracer is None
assert not [name for name in sys.modules if name.startswith("opentelemetry.")]
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


async def test_tracker_polls_and_changes_are_counted() -> None:
    from campaignkit.sandbox import Sandbox

    polls = sum(counter("campaignkit.tracker.polls").values())
    changes = sum(counter("campaignkit.tracker.changes").values())
    async with Sandbox(speed=50) as sb, sb.client() as client:
        poll = (await client.list_polls())[0].id
        ack = await client.send_campaign(poll, [User(cellphone="3001230000", country_code="+57")])
        tracker = client.track(ack, until="settled", poll_interval=0.05, max_interval=0.1)
        seen = [change async for change in tracker]
    assert sum(counter("campaignkit.tracker.polls").values()) - polls == tracker.stats.polls
    assert seen
    assert sum(counter("campaignkit.tracker.changes").values()) - changes == len(seen)
