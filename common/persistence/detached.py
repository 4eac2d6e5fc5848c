"""ORM objects built from rows read with plain SQL, to show and never to change.

The API's reads (``scheduler.services.job_queries.read_job``, ``run_queries.get_run``)
read rows with plain SQL and hand them on as the mapped classes the response builders
take. Through the constructor, each column is set through the ORM's attribute events:
25 µs for a job, 270 µs for a job of four tasks with its latest run, most of a job
read's own work. Here the values go straight into the object's ``__dict__``, as the
ORM's own loading does: 1.5 µs a job. The object belongs to no session: to show, not
to change.

The constructor also configures the mappers (once, for all classes) the first time any
mapped class is built; ``new_instance`` does not. In a process whose first ORM work is
one of these reads (an API worker whose first request is ``GET /runs/{id}``), every
attribute of the object then had no implementation yet and reading one raised, a 500.
So :func:`detached` configures them first when its class's mapper is not yet: asked
unconditionally, ``configure_mappers`` costs 1.6 µs a call even when done, as much as
the object itself, once per task of a job read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from sqlalchemy.orm import configure_mappers

from common.persistence.models import Base

M = TypeVar("M", bound=Base)


def detached(model: type[M], values: Mapping[str, Any]) -> M:
    """An instance of ``model`` whose attributes are ``values`` (column names)."""
    if not model.__mapper__.configured:
        configure_mappers()
    instance: M = model.__mapper__.class_manager.new_instance()
    instance.__dict__.update(values)
    return instance
