"""What ``campaignkit worker``'s Redis broker relies on in taskiq-redis, whose
``listen()`` it rewrites: the installed version within the bound of
pyproject.toml, the upstream method still the one that was read, and the
attributes the rewrite uses still there. No server needed."""

from __future__ import annotations

import hashlib
import inspect
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from taskiq_redis import RedisStreamBroker

from campaignkit._backoff import reconnect_delay
from campaignkit.workers import broker_from
from campaignkit.workers._brokers import client_name

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"

# sha256 of taskiq-redis 1.2's RedisStreamBroker.listen source, the one the
# rewrite replaces. A new release changes it: read it, port what it fixes,
# then raise the bound in pyproject.toml and this digest together.
UPSTREAM_LISTEN = "1438933fb9feb9b0"


def workers_requirement(name: str) -> Requirement:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    found = [Requirement(r) for r in extras["workers"] if Requirement(r).name == name]
    assert len(found) == 1
    return found[0]


def test_taskiq_redis_is_bounded_above_and_installed_within() -> None:
    requirement = workers_requirement("taskiq-redis")
    assert any(spec.operator in ("<", "<=", "~=", "==") for spec in requirement.specifier)
    assert requirement.specifier.contains(version("taskiq-redis"))


def test_the_rewritten_listen_still_matches_upstream() -> None:
    source = inspect.getsource(RedisStreamBroker.listen)
    assert hashlib.sha256(source.encode()).hexdigest()[:16] == UPSTREAM_LISTEN
    broker = broker_from("redis://127.0.0.1:1/0", queue="q 1", redeliver_after=2.5)
    assert isinstance(broker, RedisStreamBroker)
    for name in (
        "consumer_group_name",
        "consumer_name",
        "queue_name",
        "connection_pool",
        "block",
        "count",
        "idle_timeout",
        "unacknowledged_batch_size",
    ):
        assert hasattr(broker, name), name
    assert (broker.queue_name, broker.idle_timeout, broker.count) == ("q 1", 2500, 1)
    assert list(inspect.signature(broker._ack_generator).parameters) == ["id", "queue_name"]
    assert inspect.iscoroutinefunction(broker._declare_consumer_group)
    # Its connections carry a name of the queue's: operators (and the tests)
    # find a queue's workers in CLIENT LIST.
    assert broker.connection_pool.connection_kwargs["client_name"] == client_name("q 1")
    assert re.fullmatch(r"campaignkit:[A-Za-z0-9_.:-]+", client_name("q 1 é"))


def test_reconnect_delays_are_jittered_and_capped() -> None:
    for attempt in range(1, 30):
        delays = {reconnect_delay(attempt) for _ in range(50)}
        assert len(delays) > 1
        assert all(0 <= d <= min(5.0, 0.1 * 2 ** (attempt - 1)) for d in delays)
