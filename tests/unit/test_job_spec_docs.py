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


def test_the_readmes_first_job_is_the_example_file() -> None:
    """The README shows ``examples/first-job.yaml`` as it is (its comment header aside)."""
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    shown = readme.split("```yaml\n# examples/first-job.yaml\n", 1)[1].split("```", 1)[0]
    lines = (root / "examples" / "first-job.yaml").read_text().splitlines(keepends=True)
    assert shown == "".join(line for line in lines if not line.startswith("#"))
