"""The broker of the RabbitMQ recipes (Celery, Dramatiq)."""

from __future__ import annotations

import pytest
from helpers import real_servers


@pytest.fixture
def rabbitmq_url() -> str:
    return real_servers.rabbitmq_url()
