"""A connector with no egress allowance (what compose runs) refuses internal targets.

``http`` and ``webservice`` attempts to the cloud metadata address, a private address,
``localhost``, the stub service on loopback, and the ports of the API and Redis are
FAILED with a message naming the rule, and the stub never sees a request (issue 14).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from common.config import Settings
from tests.http_stub import HttpStub
from tests.integration.workers.conftest import Dispatcher, ResultInbox, new_dispatch

from .conftest import ConnectorProcess, free_port

pytestmark = [pytest.mark.integration]

LOOPBACK_RULE = "is a loopback address; allow it with STELLWERK_EGRESS_ALLOW"


@pytest.fixture(scope="module")
def strict_connector(
    connector_redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConnectorProcess]:
    log = tmp_path_factory.mktemp("connector") / "connector.log"
    process = ConnectorProcess(connector_redis_url, "strict-connector@localhost", free_port(),
                               log, egress_allow="")
    process.wait_ready()
    yield process
    process.stop()


def failed_message(dispatcher: Dispatcher, inbox: ResultInbox, task_type: str, url: str) -> str:
    dispatch = new_dispatch(task_type, params={"url": url})
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    assert result.outcome == "FAILED", result.message
    return result.message


@pytest.mark.parametrize("task_type", ["http", "webservice"])
@pytest.mark.parametrize(("url", "rule"), [
    ("http://169.254.169.254/latest/meta-data/",
     "egress: 169.254.169.254 is a cloud metadata address, always refused"),
    ("http://metadata.google.internal/computeMetadata/v1/",
     "egress: metadata.google.internal is a cloud metadata name, always refused"),
    ("http://10.0.0.5:8080/", "egress: 10.0.0.5 is a private address; allow it with "
     "STELLWERK_EGRESS_ALLOW"),
    ("http://[::ffff:169.254.169.254]/", "always refused"),
    ("http://localhost:8080/", f"egress: localhost (127.0.0.1) {LOOPBACK_RULE}"),
])
@pytest.mark.usefixtures("strict_connector")
def test_internal_targets_fail_naming_the_rule(
    dispatcher: Dispatcher, inbox: ResultInbox, task_type: str, url: str, rule: str,
) -> None:
    message = failed_message(dispatcher, inbox, task_type, url)
    assert rule in message
    method = "GET" if task_type == "http" else "POST"
    assert message.startswith(f"{method} {url}: egress: ")


@pytest.mark.parametrize("task_type", ["http", "webservice"])
def test_a_loopback_service_without_an_allowance_never_sees_the_call(
    strict_connector: ConnectorProcess, dispatcher: Dispatcher, inbox: ResultInbox,
    stub: HttpStub, task_type: str,
) -> None:
    url = stub.url("/status/200")
    message = failed_message(dispatcher, inbox, task_type, url)
    assert message == f"{'GET' if task_type == 'http' else 'POST'} {url}: egress: 127.0.0.1 " \
        f"{LOOPBACK_RULE}"
    assert stub.received("/status/200") == []


def test_the_api_and_redis_ports_are_refused(
    strict_connector: ConnectorProcess, dispatcher: Dispatcher, inbox: ResultInbox,
    settings: Settings, connector_redis_url: str,
) -> None:
    for port in (urlsplit(connector_redis_url).port, urlsplit(settings.api_url).port,
                 strict_connector.port):
        message = failed_message(dispatcher, inbox, "http", f"http://127.0.0.1:{port}/")
        assert message.endswith(f"egress: 127.0.0.1 {LOOPBACK_RULE}")
