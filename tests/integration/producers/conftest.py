"""A request consumer on a database and a Redis database of the module's own.

The e2e system's notify process consumes ``stellwerk.jobs`` on the session's Redis
database and its beat works on the session's database; these tests must see every
request they send answered by the consumer under test, and nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from common.config import Settings
from common.persistence.migrate import upgrade
from scheduler.producers.consumer import RequestConsumer
from scheduler.producers.main import build_request_consumer
from tests.conftest import scratch_database


@pytest.fixture(scope="module")
def own_settings(quiet_settings: Settings, server_urls: tuple[str, str]) -> Iterator[Settings]:
    """The module's Redis database, and a migrated scratch database dropped afterwards."""
    with scratch_database(server_urls[0]) as url:
        upgrade(url)
        yield quiet_settings.model_copy(update={"database_url": url})


@pytest.fixture(scope="module")
def consumer(own_settings: Settings) -> Iterator[RequestConsumer]:
    """The consumer of ``stellwerk.jobs``, running in a thread."""
    consumer = build_request_consumer(own_settings)
    thread = threading.Thread(target=consumer.run, name="requests")
    thread.start()
    yield consumer
    consumer.stopping.set()
    thread.join(10)
    assert not thread.is_alive()
