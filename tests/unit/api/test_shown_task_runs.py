"""A run's read loads exactly the task run columns its answer shows."""

from __future__ import annotations

from common.persistence.models import TaskRun
from scheduler.api.schemas import TaskRunPublic
from scheduler.services.run_queries import ShownTaskRun


def test_the_columns_loaded_are_the_fields_shown() -> None:
    assert set(ShownTaskRun._fields) == set(TaskRunPublic.model_fields)
    assert set(ShownTaskRun._fields) <= set(TaskRun.__table__.columns.keys())
