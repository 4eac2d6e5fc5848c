"""Flow rows go with their task runs, without foreign keys (issue 16, migration 0020).

A trigger on ``task_runs`` takes a deleted task run's waits and slots; an admission
takes no slot for an attempt whose wait went meanwhile; an engine's repair sweeps any
row whose task run is gone. Real PostgreSQL, the engine's batch applier driven by hand
(``Engine`` of ``test_flow_gate``); each test's key carries a fresh suffix.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import text

from common.config import Settings
from common.persistence.db import driver
from scheduler.engine import repair
from scheduler.services.flow_admission import Slots
from tests.integration.engine.test_flow_gate import Engine, fan_out

ROWS = (
    "SELECT (SELECT count(*) FROM flow_slots WHERE key = :k), "
    "(SELECT count(*) FROM flow_waiters WHERE key = :k)"
)


def rows(engine: Engine, key: str) -> tuple[int, int]:
    """The key's slot rows and wait rows."""
    with engine.sessions() as session:
        slots, waits = session.execute(text(ROWS), {"k": key}).one()
    return int(slots), int(waits)


def held_fan_out(settings: Settings) -> tuple[Engine, str, uuid.UUID]:
    """A started fan-out of 5 on a fresh key of limit 2: 2 admitted, 3 waiting."""
    engine = Engine(settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", 5, concurrency=[{"key": key, "limit": 2}]))
    engine.start(run_id)
    assert rows(engine, f"key:{key}") == (2, 3)
    return engine, f"key:{key}", run_id


def test_a_deleted_run_takes_its_slots_and_waits_along(quiet_settings: Settings) -> None:
    engine, key, run_id = held_fan_out(quiet_settings)
    with engine.sessions.begin() as session:
        session.execute(text("DELETE FROM runs WHERE id = :r"), {"r": run_id})
    assert rows(engine, key) == (0, 0)


def test_an_admission_takes_no_slot_for_an_attempt_whose_wait_went(
    quiet_settings: Settings,
) -> None:
    """The wait went with its task run after the admission read it: a slot for that
    attempt would never be released. The other attempt's slot is taken."""
    engine, key, run_id = held_fan_out(quiet_settings)
    waiting = [engine.task(run_id, name)
               for (_, name), why in engine.states([run_id]).items() if why][:2]
    gone, kept = waiting
    now = datetime.now(UTC)
    with engine.sessions.begin() as session:
        session.execute(text("DELETE FROM flow_waiters WHERE task_run_id = :t"),
                        {"t": gone.id})
        Slots([(key, t.id, t.attempt, "", now, None) for t in waiting], [],
              [t.id for t in waiting]).write(driver(session))
    with engine.sessions() as session:
        holding = set(session.scalars(text(
            "SELECT task_run_id FROM flow_slots WHERE key = :k"), {"k": key}))
    assert kept.id in holding
    assert gone.id not in holding
    assert rows(engine, key) == (3, 1)


def test_an_engines_repair_sweeps_rows_whose_task_run_is_gone(
    quiet_settings: Settings,
) -> None:
    engine, key, run_id = held_fan_out(quiet_settings)
    now = datetime.now(UTC)
    with engine.sessions.begin() as session:
        session.execute(text(
            "INSERT INTO flow_slots (key, task_run_id, attempt, tenant, at) "
            "VALUES (:k, :t, 1, '', :now)"), {"k": key, "t": uuid.uuid4(), "now": now})
        session.execute(text(
            "INSERT INTO flow_waiters (key, task_run_id, run_id, task, attempt, tenant, "
            "priority, since) VALUES (:k, :t, :r, 'x', 1, '', 0, :now)"),
            {"k": key, "t": uuid.uuid4(), "r": run_id, "now": now})
    assert rows(engine, key) == (3, 4)
    with engine.sessions.begin() as session:
        repair.repair_flow(session)
    assert rows(engine, key) == (2, 3)
