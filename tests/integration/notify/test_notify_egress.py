"""Webhooks the egress policy refuses are dead after one try, naming the rule (issue 14).

The runner here has no allowance: the receiver on 127.0.0.1, ``localhost``, the cloud
metadata address, the API's own port and Redis's port are all refused without a
connection, and the delivery is not retried (no later try could pass).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from common.config import Settings
from scheduler.notify.main import NotifyRunner
from tests.integration.notify.conftest import Log, Notify, event, running
from tests.webhook_receiver import Receiver

LOOPBACK_RULE = "is a loopback address; allow it with STELLWERK_EGRESS_ALLOW"


@pytest.fixture
def strict_runner(notify_settings: Settings) -> Iterator[NotifyRunner]:
    """A runner with no egress allowance (what compose runs)."""
    with running(notify_settings.model_copy(update={"egress_allow": ""})) as started:
        yield started


def hook(url: str, app: str) -> dict[str, Any]:
    return {"events": ["run.*"], "selector": {"application": app},
            "target": {"webhook": {"url": url, "secret": "s"}}}


def dead_once(log: Log) -> bool:
    return len(log) == 1 and log[0][0].state != "pending"


def deliver_to(notify: Notify, url: str) -> tuple[str, int, str]:
    """The state, tries and error of the one delivery of an event to ``url``."""
    app = uuid.uuid4().hex
    sid = notify.subscribe(hook(url, app))
    notify.publish(event("run.started", uuid.uuid4(), uuid.uuid4(), application=app))
    ((delivery, attempts),) = notify.wait_deliveries(sid, dead_once)
    return delivery.state, len(attempts), attempts[-1].error


def test_a_loopback_receiver_without_an_allowance_is_dead_after_one_try(
    notify: Notify, strict_runner: NotifyRunner,
) -> None:
    with Receiver() as receiver:
        state, tries, error = deliver_to(notify, receiver.url)
        assert receiver.requests == []
    assert (state, tries) == ("dead", 1)
    assert error == f"egress: 127.0.0.1 {LOOPBACK_RULE}"


def test_localhost_is_refused_as_loopback(notify: Notify, strict_runner: NotifyRunner) -> None:
    with Receiver() as receiver:
        port = urlsplit(receiver.url).port
        state, tries, error = deliver_to(notify, f"http://localhost:{port}/hook")
        assert receiver.requests == []
    assert (state, tries) == ("dead", 1)
    assert error == f"egress: localhost (127.0.0.1) {LOOPBACK_RULE}"


def test_the_cloud_metadata_address_is_refused(
    notify: Notify, strict_runner: NotifyRunner,
) -> None:
    state, tries, error = deliver_to(notify, "http://169.254.169.254/latest/meta-data/")
    assert (state, tries) == ("dead", 1)
    assert error == "egress: 169.254.169.254 is a cloud metadata address, always refused"


def test_the_api_and_redis_ports_are_refused(
    notify: Notify, notify_settings: Settings, strict_runner: NotifyRunner,
) -> None:
    redis_port = urlsplit(notify_settings.redis_url or "").port
    api_port = urlsplit(notify_settings.api_url).port
    for port in (redis_port, api_port):
        state, tries, error = deliver_to(notify, f"http://127.0.0.1:{port}/")
        assert (state, tries, error) == ("dead", 1, f"egress: 127.0.0.1 {LOOPBACK_RULE}")


def test_an_allowed_loopback_receiver_gets_the_event(
    notify: Notify, runner: NotifyRunner,
) -> None:
    with Receiver() as receiver:
        state, tries, error = deliver_to(notify, receiver.url)
        assert len(receiver.requests) == 1
    assert (state, tries, error) == ("delivered", 1, "")
