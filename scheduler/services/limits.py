"""The sizes Stellwerk refuses beyond (docs/decisions.md, "Limits").

Shared by the REST API (``scheduler.api.limits`` enforces them on requests) and the
``stellwerk.jobs`` consumer (``scheduler.producers.validation``), so a body is refused
for the same size whichever way it was submitted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from common.config import Settings
from common.domain.patch import JobPatch
from common.domain.spec import JobSpec

_PARAMS_FIELDS = ("params", "secure_params", "storage")


@dataclass(frozen=True)
class Limits:
    """Sizes the API refuses beyond; from settings (``STELLWERK_API_MAX_*``)."""

    max_body_bytes: int
    max_params_bytes: int

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """The limits configured in ``settings``."""
        return cls(settings.api_max_body_bytes, settings.api_max_params_bytes)


def params_faults(spec: JobSpec | JobPatch, max_bytes: int) -> list[dict[str, Any]]:
    """The first params object larger than ``max_bytes``, as a fault (none: empty)."""
    for loc, value in _params_objects(spec):
        size = len(json.dumps(value, separators=(",", ":")).encode())
        if size > max_bytes:
            return [{"loc": loc, "msg": f"is {size} bytes as JSON; the limit is {max_bytes}",
                     "type": "value_error"}]
    return []


def _params_objects(
    spec: JobSpec | JobPatch,
) -> Iterator[tuple[tuple[str | int, ...], dict[str, Any]]]:
    for name in _PARAMS_FIELDS:
        value = getattr(spec, name, None)
        if value:
            yield ("body", name), value
    for index, task in enumerate(spec.tasks or []):
        for name in ("params", "secure_params"):
            value = getattr(task, name)
            if value:
                yield ("body", "tasks", index, name), value
