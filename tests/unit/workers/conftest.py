"""Helpers for the worker unit tests: contexts and a publisher that keeps its messages."""

from __future__ import annotations

from typing import Any

import pytest

from common.messaging.messages import TaskResult
from common.messaging.publisher import Outgoing


class RecordingPublisher:
    """Stands in for ``Publisher`` where no broker is wanted: it keeps what it is given."""

    def __init__(self) -> None:
        self.sent: list[Outgoing] = []

    def publish(self, messages: Any) -> int:
        items = list(messages)
        self.sent.extend(items)
        return len(items)

    @property
    def results(self) -> list[TaskResult]:
        return [TaskResult.model_validate(item.payload) for item in self.sent]


@pytest.fixture
def publisher() -> RecordingPublisher:
    return RecordingPublisher()
