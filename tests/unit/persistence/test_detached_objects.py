"""``detached``: rows read with plain SQL as mapped objects, in a process new to the ORM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# A fresh interpreter: this test process configured the mappers long ago.
FIRST_ORM_WORK = """
import uuid
from common.persistence.detached import detached
from common.persistence.models import Run
run_id = uuid.uuid4()
run = detached(Run, {"id": run_id, "number": 7})
assert (run.id, run.number) == (run_id, 7), (run.id, run.number)
print("ok")
"""


def test_a_detached_object_reads_in_a_process_that_built_no_mapped_object_before() -> None:
    """An API worker whose first request was ``GET /runs/{id}`` answered 500: the mappers
    were not configured yet, and every attribute of the object had no implementation."""
    done = subprocess.run([sys.executable, "-c", FIRST_ORM_WORK], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
