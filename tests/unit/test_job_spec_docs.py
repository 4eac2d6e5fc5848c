"""``docs/job-spec.md`` names every field a job spec accepts, so none is undocumented."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from common.domain.spec import JobSpec, Schedule, TaskDefaults, TaskSpec

DOC = (Path(__file__).resolve().parents[2] / "docs" / "job-spec.md").read_text()


@pytest.mark.parametrize("model", [JobSpec, TaskSpec, TaskDefaults, Schedule])
def test_every_field_is_documented(model: type[BaseModel]) -> None:
    missing = [name for name in model.model_fields if f"`{name}`" not in DOC]
    assert missing == [], f"{model.__name__} fields missing from docs/job-spec.md"
