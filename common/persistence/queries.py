"""Every hand-written SQL statement of Stellwerk, by name (issue 15).

The hot paths (the engine's batch, the notify intake, the beat's cron tick) send fixed
SQL through psycopg, and some duties use SQLAlchemy ``text()``; either way the statement
lives here, so that one file answers "what does Stellwerk ask of PostgreSQL", a column
renamed in a migration is found by one search, and ``tests/integration/test_queries.py``
has PostgreSQL check that every statement here names tables and columns that exist
(it prepares each one against the migrated schema). Two styles of placeholders:
``%s``/``%(name)s``/``%b`` for psycopg strings, ``:name`` for ``text()``.

What uses each statement is named in its section's title.
"""

from __future__ import annotations

from sqlalchemy import text

# ---- Notify events: common.persistence.notify_events, scheduler.notify.intake ----

NOTIFY_CHANNEL = "stellwerk_notify"

# One statement: the insert and the wake-up (sent at commit; repeats in one
# transaction are folded into one by PostgreSQL).
RECORD_NOTIFY_EVENTS = (
    "WITH recorded AS (INSERT INTO notify_events (events) VALUES (%s)) "
    f"SELECT pg_notify('{NOTIFY_CHANNEL}', '')"
)

# The events recorded by the current transaction (``now()`` is its start, which
# ``created_at`` defaults to) that contain the given fields.
NOTIFY_EVENTS_RECORDED_HERE = (
    "SELECT events FROM notify_events WHERE created_at = now() AND events @> %s ORDER BY id"
)

LOCK_NOTIFY_INTAKE = "SELECT pg_advisory_xact_lock(%s)"

TAKE_NOTIFY_EVENTS = "SELECT id, events FROM notify_events ORDER BY id LIMIT %s"

FORGET_NOTIFY_EVENTS = "DELETE FROM notify_events WHERE id = ANY(%s)"


# ---- Deliveries: scheduler.notify.recording and .deliveries ----

# ``seq`` is drawn in the order of the arrays (the events' order), hence the ORDER BY.
INSERT_DELIVERIES = (
    "INSERT INTO deliveries (id, subscription_id, run_id, event_id, event, payload, state, "
    "attempts, due_at, created_at) "
    "SELECT d.id, d.subscription_id, d.run_id, d.event_id, d.event, d.payload::jsonb, "
    "'pending', 0, %s, %s "
    "FROM unnest(%s::uuid[], %s::uuid[], %s::uuid[], %s::uuid[], %s::text[], %s::text[]) "
    "WITH ORDINALITY AS d(id, subscription_id, run_id, event_id, event, payload, n) "
    "ORDER BY d.n ON CONFLICT (subscription_id, event_id) DO NOTHING"
)

# Only the oldest pending delivery of a (subscription, run) may go: while it is in flight
# (its due_at is its lease's end) or waits for a retry, the run's later events wait too.
CLAIM_DELIVERIES = text(
    "UPDATE deliveries AS d SET due_at = :lease_end, claim = :claim "
    "FROM (SELECT id FROM deliveries AS p WHERE state = 'pending' AND due_at <= :now "
    "      AND NOT EXISTS (SELECT 1 FROM deliveries AS e WHERE e.state = 'pending' "
    "        AND e.subscription_id = p.subscription_id AND e.run_id = p.run_id "
    "        AND e.seq < p.seq) "
    "      ORDER BY due_at, seq LIMIT :limit FOR UPDATE SKIP LOCKED) AS c, "
    "     subscriptions AS s "
    "WHERE d.id = c.id AND s.id = d.subscription_id "
    "RETURNING d.id, d.subscription_id, d.event_id, d.event, d.payload, d.attempts, "
    "s.target, s.url, s.sealed_secret, s.sealed_headers, s.celery_task, s.queue"
)

FINISH_DELIVERY = text(
    "WITH done AS ("
    "  UPDATE deliveries SET state = :state, attempts = attempts + 1, due_at = :due_at, "
    "  claim = NULL, finished_at = :finished_at WHERE id = :id AND claim = :claim "
    "  RETURNING id, attempts) "
    "INSERT INTO delivery_attempts (delivery_id, number, at, duration_ms, status_code, error) "
    "SELECT id, attempts, :at, :duration_ms, :status_code, :error FROM done RETURNING id"
)

PRUNE_DELIVERIES = text(
    "DELETE FROM deliveries WHERE state IN ('delivered', 'dead') AND finished_at < :before"
)


# ---- Runs as the engine reads them: scheduler.engine.loading and .structure ----

# A statement with an array parameter (``= ANY(%s)``) keeps being planned for the values
# of each call: PostgreSQL's generic plan assumes a few elements, costs more than the
# custom one, and so never wins. For the engine's lock of its runs and the admission's
# read of a key's waiters that was 0.35 and 0.31 ms of planning an engine batch, more
# than their execution (issue 16): they run between ``PIN_PLAN`` and ``UNPIN_PLAN`` (in
# the same transaction), planned once a connection. Their generic plans are checked by
# ``tests/integration/test_flow_plans.py`` and ``engine/test_run_lock_plan.py``.
PIN_PLAN = "SET LOCAL plan_cache_mode = force_generic_plan"
UNPIN_PLAN = "RESET plan_cache_mode"

LOCK_RUNS = (
    "SELECT r.id, r.job_id, r.number, r.state, r.version, r.started_at, j.version, "
    "s.last_success_start, s.last_success_finish, s.data::text, r.traceparent "
    "FROM runs r JOIN jobs j ON j.id = r.job_id "
    "LEFT JOIN job_storage s ON s.job_id = r.job_id "
    "WHERE r.id = ANY(%s) ORDER BY r.id FOR UPDATE OF r"
)

CLAIM_MESSAGES = (
    "INSERT INTO consumed_messages (message_id) SELECT unnest(%s::uuid[]) "
    "ON CONFLICT DO NOTHING RETURNING message_id"
)

LOAD_TASK_RUNS = (
    "SELECT run_id, id, name, state, attempt, base, detached FROM task_runs "
    "WHERE run_id = ANY(%s)"
)

LOAD_JOBS = ("SELECT id, version, name, type, application, tenant, params, secure_params, "
             "spec FROM jobs WHERE id = ANY(%s)")

# ``flow`` as text and without the settings as written (``own``, for patches): the
# engine parses each distinct text once (``scheduler.engine.structure``).
LOAD_TASKS = ("SELECT job_id, id, name, type, params, secure_params, timeout_s, retries, "
              "retry_backoff_s, confirm, binding, priority, (flow - 'own')::text "
              "FROM tasks WHERE job_id = ANY(%s) ORDER BY job_id, position")

LOAD_EDGES = "SELECT job_id, from_task, to_task FROM task_edges WHERE job_id = ANY(%s)"

# ---- Showing one job (the API's reads): scheduler.services.job_queries.read_job ----

# The job, its first run, its latest run, its storage, its tasks in position order and
# its edges (as JSON): one statement. (Two, pipelined, cost the API's event loop 0.27 ms
# of CPU against 0.16.) Each is one scan by job (``job_detail`` names each task's
# successors): no join, so no plan the statistics can spoil. Looking the successors'
# names up per task, on tables never analyzed (a job read as soon as it is written),
# PostgreSQL ran a hash join over every task once for each task: 6-11 s for a
# 10,000-task fan-out, and a grouped join instead took 2.4 s through the edges' indexes.
READ_JOB = (
    "SELECT j.*, (SELECT f.id FROM runs AS f WHERE f.job_id = j.id AND f.number = 1) "
    "  AS first_run_id, l.id AS latest_id, l.number AS latest_number, "
    "  l.state AS latest_state, l.started_at AS latest_started_at, "
    "  l.finished_at AS latest_finished_at, s.data AS storage, "
    "  (SELECT json_agg(d ORDER BY d.position) FROM tasks AS d WHERE d.job_id = j.id) "
    "  AS tasks, (SELECT json_agg(json_build_array(e.from_task, e.to_task)) "
    "  FROM task_edges AS e WHERE e.job_id = j.id) AS edges "
    "FROM jobs AS j LEFT JOIN LATERAL (SELECT id, number, state, started_at, finished_at "
    "  FROM runs WHERE job_id = j.id ORDER BY number DESC LIMIT 1) AS l ON true "
    "LEFT JOIN job_storage AS s ON s.job_id = j.id WHERE j.id = %s"
)


# ---- Listing jobs (``GET /jobs``): scheduler.services.job_queries.list_jobs ----

# A page of jobs, newest first, each with its first run's id and its latest run (``l``)
# as ``READ_JOB`` has them: one statement. The page is taken first (on
# ``ix_jobs_created``), then its runs joined: where the page has to be sorted (a filter
# the index does not serve), joining first looked up every job's latest run, 540 ms for
# 50,000 jobs. Only the columns a summary shows: a job's spec and params, JSON the page
# does not show, were two thirds of the decoding.
# ``{where}`` is ``true`` or some of ``LIST_JOBS_WHERE`` joined by AND (each names its
# own parameters, each a condition on ``j``).
LIST_JOBS = (
    "SELECT j.*, (SELECT f.id FROM runs AS f WHERE f.job_id = j.id AND f.number = 1) "
    "  AS first_run_id, l.id AS latest_id, l.number AS latest_number, "
    "  l.state AS latest_state, l.started_at AS latest_started_at, "
    "  l.finished_at AS latest_finished_at "
    "FROM (SELECT j.id, j.name, j.description, j.application, j.type, j.tenant, j.owner, "
    "  j.labels, j.priority, j.schedule, j.draft, j.enabled, j.version, j.next_fire_at, "
    "  j.created_at, j.updated_at FROM jobs AS j WHERE {where} "
    "  ORDER BY j.created_at DESC, j.id DESC LIMIT %(limit)s) AS j "
    "LEFT JOIN LATERAL (SELECT id, number, state, started_at, finished_at "
    "  FROM runs WHERE job_id = j.id ORDER BY number DESC LIMIT 1) AS l ON true "
    "ORDER BY j.created_at DESC, j.id DESC"
)

LIST_JOBS_WHERE = {
    "type": "j.type = %(type)s",
    "application": "j.application = %(application)s",
    "tenant": "j.tenant = %(tenant)s",
    "labels": "j.labels @> %(labels)s",
    # ``job_queries.job_state`` in SQL: a cron job between runs shows SCHEDULED or
    # DISABLED, any other job its latest run's state (``s``), or NEW.
    "states": (
        "(SELECT CASE WHEN NOT j.draft AND coalesce(j.schedule->>'cron', '') <> '' "
        "  AND (s.state IS NULL OR s.state = ANY(%(terminal)s)) "
        "  THEN CASE WHEN j.enabled THEN 'SCHEDULED' ELSE 'DISABLED' END "
        "  ELSE coalesce(s.state, 'NEW') END FROM (SELECT (SELECT r.state FROM runs AS r "
        "  WHERE r.job_id = j.id ORDER BY r.number DESC LIMIT 1) AS state) AS s) "
        "= ANY(%(states)s)"
    ),
    "name": "j.name ILIKE %(name)s ESCAPE '\\'",
    "cursor": "(j.created_at, j.id) < (%(after_created_at)s, %(after_id)s)",
}

# ---- Listing runs across jobs (``GET /runs``): scheduler.services.run_lists ----

# A run as the lists show it (``r``): its columns and its task runs counted by state (a
# JSON object), in the statements below.
LISTED_RUN_COLUMNS = (
    "r.id, r.job_id, r.number, r.trigger, r.state, r.scheduled_for, r.created_at, "
    "r.started_at, r.finished_at, (SELECT json_object_agg(c.state, c.n) FROM ("
    "SELECT t.state, count(*) AS n FROM task_runs AS t WHERE t.run_id = r.id "
    "GROUP BY t.state) AS c) AS counts"
)

# A page of runs, newest first (on ``ix_runs_created``), each with its job's name and
# tenant: one statement, the page taken before its jobs are joined. ``{where}`` as
# ``LIST_JOBS``'.
LIST_RUNS = (
    f"SELECT {LISTED_RUN_COLUMNS}, j.name AS job_name, j.tenant AS job_tenant "
    "FROM (SELECT * FROM runs AS r WHERE {where} "
    "  ORDER BY r.created_at DESC, r.id DESC LIMIT %(limit)s) AS r "
    "JOIN jobs AS j ON j.id = r.job_id ORDER BY r.created_at DESC, r.id DESC"
)

LIST_RUNS_WHERE = {
    "tenant": "r.job_id IN (SELECT t.id FROM jobs AS t WHERE t.tenant = %(tenant)s)",
    "states": "r.state = ANY(%(states)s)",
    "triggers": "r.trigger = ANY(%(triggers)s)",
    "job_id": "r.job_id = %(job_id)s",
    "cursor": "(r.created_at, r.id) < (%(after_created_at)s, %(after_id)s)",
}

# One job's runs (``GET /jobs/{id}/runs``), newest first by number, with the job's tenant:
# a row with no run when it has none in the page, no row when there is no such job.
# ``{where}`` as ``LIST_JOBS``', with ``LIST_JOB_RUNS_WHERE``.
LIST_JOB_RUNS = (
    f"SELECT j.tenant AS job_tenant, {LISTED_RUN_COLUMNS} FROM jobs AS j "
    "LEFT JOIN LATERAL (SELECT * FROM runs WHERE job_id = j.id AND {where} "
    "  ORDER BY number DESC LIMIT %(limit)s) AS r ON true "
    "WHERE j.id = %(job_id)s ORDER BY r.number DESC"
)

LIST_JOB_RUNS_WHERE = {
    "states": "state = ANY(%(states)s)",
    "cursor": "number < %(before)s",
}

# ---- Showing one run (the API's reads): scheduler.services.run_queries ----

# What a run's ``ETag`` is made of, and whose it is: its version, its job's, the tenant.
RUN_VERSIONS = (
    "SELECT r.version, j.version, j.tenant FROM runs AS r JOIN jobs AS j ON j.id = r.job_id "
    "WHERE r.id = %s"
)

READ_RUN = "SELECT * FROM runs WHERE id = %s"

# Its task runs in the job's task order, each with its task's binding (the columns of
# ``ShownTaskRun``, then ``binding``); pipelined with ``READ_RUN``.
READ_RUN_TASKS = (
    "SELECT r.id, r.name, r.type, r.state, r.attempt, r.worker, r.output, r.message, "
    "  r.started_at, r.finished_at, r.waiting_for, t.binding "
    "FROM task_runs AS r JOIN tasks AS t ON t.id = r.task_id WHERE r.run_id = %s "
    "ORDER BY t.position"
)


# A page of a run's journal, oldest first (``GET /runs/{id}/journal``), after entry
# ``after`` (0: from the first), pipelined with ``RUN_VERSIONS`` (whose run it is);
# ``{where}`` the clauses of ``READ_JOURNAL_WHERE`` that apply (``scheduler.services.
# pages``). The row comparison pins the page to ``ix_journal_run_order``: with ``id >``
# alone, PostgreSQL read the primary key from ``after`` on and filtered by run (28,113
# rows for a last page of 5 on 48,000 entries), sure that the run's rows were spread
# evenly; a recent run's first page would have read the whole table.
READ_JOURNAL = (
    "SELECT * FROM journal WHERE run_id = %(run_id)s "
    "AND (run_id, id) > (%(run_id)s, %(after)s) AND {where} "
    "ORDER BY run_id, id LIMIT %(limit)s"
)
READ_JOURNAL_WHERE = {"task": "task = %(task)s"}

# A job's history as a grid (``GET /jobs/{id}/history``): the job's tenant and its task
# names in order, then (pipelined) its last runs, newest first, each with its task runs'
# states by name (a JSON object).
JOB_HISTORY_TASKS = (
    "SELECT j.tenant, ARRAY(SELECT t.name FROM tasks AS t WHERE t.job_id = j.id "
    "ORDER BY t.position) FROM jobs AS j WHERE j.id = %s"
)
JOB_HISTORY_RUNS = (
    "SELECT r.id, r.number, r.trigger, r.state, r.started_at, r.finished_at, "
    "  (SELECT json_object_agg(t.name, t.state) FROM task_runs AS t WHERE t.run_id = r.id) "
    "  AS tasks FROM runs AS r WHERE r.job_id = %s ORDER BY r.number DESC LIMIT %s"
)


# ---- Retention: common.persistence.retention ----

# The job's runs up to its (keep + 1)-th newest may go: ``OFFSET keep`` on the unique
# (job_id, number) index reads keep + 1 entries per candidate; a job with fewer runs
# gets NULL, and ``number <= NULL`` keeps them all.
PRUNE_RUNS = text(
    "WITH doomed AS ("
    "  SELECT r.id FROM runs AS r JOIN jobs AS j ON j.id = r.job_id "
    "  WHERE r.finished_at < :cutoff AND r.state = ANY(:terminal) "
    "    AND (CAST(:tenant AS varchar) IS NULL OR j.tenant = :tenant) "
    "    AND r.number <= (SELECT k.number FROM runs AS k WHERE k.job_id = r.job_id "
    "                     ORDER BY k.number DESC OFFSET :keep LIMIT 1) "
    "  ORDER BY r.finished_at LIMIT :limit FOR UPDATE OF r SKIP LOCKED) "
    "DELETE FROM runs AS r USING doomed WHERE r.id = doomed.id"
)

# A fire's row only keeps a beat from firing its time twice, and the beat never goes
# back before a job's ``next_fire_at``. A past fire goes when its run has gone (a run
# finishes after its fire) or when it had none (skipped); a buffered fire still waits.
PRUNE_FIRES = text(
    "WITH old AS ("
    "  SELECT f.id FROM fires AS f JOIN jobs AS j ON j.id = f.job_id "
    "  WHERE f.outcome <> 'buffered' AND f.fire_at < :cutoff "
    "    AND NOT EXISTS (SELECT FROM runs AS r WHERE r.id = f.run_id) "
    "    AND (CAST(:tenant AS varchar) IS NULL OR j.tenant = :tenant) "
    "  ORDER BY f.fire_at LIMIT :limit FOR UPDATE OF f SKIP LOCKED) "
    "DELETE FROM fires AS f USING old WHERE f.id = old.id"
)


# ---- A job's rows as they are written: scheduler.services.jobs, .job_update ----

# A new job's rows, one statement: its own, its storage's, its tasks' and its edges'.
# Through the ORM's unit of work the job's two rows cost a create 0.8 ms of the API's
# CPU; each statement more is a round trip more. The parameters: ``JOB_COLUMNS``', the
# storage's data and time, one array a column of ``CREATED_TASK_COLUMNS`` (the job's
# tasks), the edges' two arrays (from, to), then the tenant and name again. Unless the
# tenant has a job of that name: then nothing is written (the other rows join the job's
# insert, which gave none), ``created`` is NULL and ``holder`` that job's id (NULL too
# when the holder committed while this statement waited on it: its snapshot is older).
# The name is checked by the insert, not by a read before it, which cost a round trip
# and let two creates of one name race to a unique violation (a 500).
#
# Tasks and edges go as one array literal a column (``common.persistence.arrays``, JSON
# as its text), whatever their number: a list of rows given to the ORM went to psycopg's
# ``executemany``, one INSERT a row (30,000 statements and a second for a 10,000-task
# fan-out); multi-row VALUES cost more still (psycopg parses every placeholder); ``COPY``
# was as fast for 10,000 tasks, but cost a create of a few tasks four round trips more.
JOB_COLUMNS = (
    "id", "name", "description", "application", "type", "tenant", "owner", "labels",
    "priority", "params", "secure_params", "sealed_webservice_headers", "spec", "schedule",
    "draft", "enabled", "version", "next_fire_at", "max_active_runs", "created_at",
    "updated_at",
)
CREATED_TASK_COLUMNS = (
    "id", "position", "name", "type", "params", "secure_params", "timeout_s", "retries",
    "retry_backoff_s", "confirm", "priority", "binding", "flow",
)
_TASK_ARRAYS = (
    "%b::uuid[], %b::int[], %b::text[], %b::text[], %b::text[], %b::text[], %b::float8[], "
    "%b::int[], %b::float8[], %b::bool[], %b::int[], %b::text[], %b::text[]"
)
INSERT_JOB = (
    f"WITH job AS (INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) "
    f"VALUES ({', '.join(['%s'] * len(JOB_COLUMNS))}) "
    "ON CONFLICT (tenant, name) DO NOTHING RETURNING id), "
    "storage AS (INSERT INTO job_storage (job_id, data, updated_at) "
    "  SELECT id, %s, %s FROM job), "
    f"tasks AS (INSERT INTO tasks (job_id, {', '.join(CREATED_TASK_COLUMNS)}) "
    "  SELECT job.id, t.id, t.position, t.name, t.type, t.params::jsonb, t.secure_params, "
    "  t.timeout_s, t.retries, t.retry_backoff_s, t.confirm, t.priority, t.binding::jsonb, "
    f"  t.flow::jsonb FROM job, unnest({_TASK_ARRAYS}) "
    f"  AS t({', '.join(CREATED_TASK_COLUMNS)})), "
    "edges AS (INSERT INTO task_edges (job_id, from_task, to_task) "
    "  SELECT job.id, e.f, e.t FROM job, unnest(%b::uuid[], %b::uuid[]) AS e(f, t)) "
    "SELECT (SELECT id FROM job) AS created, "
    "  (SELECT id FROM jobs WHERE tenant = %s AND name = %s) AS holder"
)
# A job's edges anew (a ``PUT`` that changes its tasks), as above.
INSERT_TASK_EDGES = (
    "INSERT INTO task_edges (job_id, from_task, to_task) "
    "SELECT %b::uuid, f, t FROM unnest(%b::uuid[], %b::uuid[]) AS e(f, t)"
)

# The job holding a name (``job_names.name_holder``, for a 409) and the worker types a
# job is bound to, checked before it is written (``worker_types.registered``): plain SQL
# on the Session's connection, as a create's ORM queries cost the API more CPU than
# PostgreSQL spent on them.
JOB_NAMED = "SELECT id FROM jobs WHERE tenant = %s AND name = %s"
# Locked ``FOR SHARE``: a type cannot be deleted while a job is being bound to it.
REGISTERED_TYPES = (
    "SELECT name, engine, url, sealed_headers, job_template FROM worker_types "
    "WHERE name = ANY(%s) FOR SHARE"
)


# ---- Runs as they are created: scheduler.services.runs ----

INSERT_RUNS = (
    "INSERT INTO runs (id, job_id, number, trigger, state, scheduled_for, late_at, "
    "activation_sent_at, traceparent, created_at, updated_at, version) "
    "SELECT r.id, r.job_id, r.number, r.trigger, 'READY', r.scheduled_for, r.late_at, r.sent, "
    "r.traceparent, %s, %s, 0 FROM unnest(%b::uuid[], %b::uuid[], %b::int[], %b::text[], "
    "%b::timestamptz[], %b::timestamptz[], %b::timestamptz[], %b::text[]) "
    "AS r(id, job_id, number, trigger, scheduled_for, late_at, sent, traceparent)"
)

INSERT_TASK_RUNS = (
    "INSERT INTO task_runs (id, run_id, task_id, name, type, state, attempt, base, message) "
    "SELECT gen_random_uuid(), r.id, t.id, t.name, t.type, 'WAITING', 0, 0, '' "
    "FROM unnest(%b::uuid[], %b::uuid[]) AS r(id, job_id) JOIN tasks t ON t.job_id = r.job_id"
)

INSERT_FIRST_JOURNAL = (
    "INSERT INTO journal (run_id, at, from_state, to_state, reason, actor) "
    "SELECT r.id, %s, '', 'READY', 'created', r.actor "
    "FROM unnest(%b::uuid[], %b::text[]) AS r(id, actor)"
)

LAST_RUN_NUMBERS = "SELECT job_id, max(number) FROM runs WHERE job_id = ANY(%s) GROUP BY job_id"


# ---- What an engine batch writes: scheduler.engine.writer ----

# The columns in the order of ``scheduler.engine.rows.JournalRow`` and ``LogRow`` (a test
# holds them equal), one array each: one statement for a batch's rows, so PostgreSQL
# prepares the journal's state CHECKs once, not once a row.
INSERT_JOURNAL = (
    "INSERT INTO journal (run_id, task, attempt, at, from_state, to_state, reason, actor) "
    "SELECT * FROM unnest(%b::uuid[], %b::text[], %b::int[], %b::timestamptz[], %b::text[], "
    "%b::text[], %b::text[], %b::text[])"
)

INSERT_LOG = (
    "INSERT INTO task_logs (task_run_id, attempt, at, stream, line) "
    "SELECT * FROM unnest(%b::uuid[], %b::int[], %b::timestamptz[], %b::text[], %b::text[])"
)

UPSERT_STORAGE = (
    "INSERT INTO job_storage (job_id, data, updated_at) VALUES (%s, %s, %s) "
    "ON CONFLICT (job_id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at"
)

# A batch's successes, one row per job (in job order, as two engines' batches lock them).
RECORD_SUCCESSES = (
    "INSERT INTO job_storage (last_success_start, last_success_finish, job_id, data, updated_at) "
    "SELECT s.start, s.finish, s.job_id, '{}', now() FROM unnest(%b::timestamptz[], "
    "%b::timestamptz[], %b::uuid[]) AS s(start, finish, job_id) ORDER BY s.job_id "
    "ON CONFLICT (job_id) DO UPDATE SET "
    "last_success_start = excluded.last_success_start, "
    "last_success_finish = excluded.last_success_finish"
)


# ---- The outbox: common.persistence.outbox ----

INSERT_OUTBOX = (
    "INSERT INTO outbox (queue, task_name, task_id, payload, due_at) "
    "SELECT q, n, i, p::jsonb, d FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], "
    "%b::timestamptz[]) AS m(q, n, i, p, d) RETURNING id"
)

# Rows by id are matched as a set, not with ``= ANY``: on its generic plan (the engine
# repeats it) and a table PostgreSQL believed empty (analyzed between fan-outs), ``= ANY``
# was a scan comparing every row with every id, 447 ms for a fan-out's 10,000 dispatches.
DELETE_OUTBOX = "DELETE FROM outbox WHERE id IN (SELECT unnest(%s::bigint[]))"

LOCK_OUTBOX_IDS = (
    "SELECT id, queue, task_name, task_id, payload, due_at FROM outbox "
    "WHERE id IN (SELECT unnest(%s::bigint[])) FOR UPDATE SKIP LOCKED"
)

# A timed row counts from its ``due_at``: it is never sent early.
LOCK_PENDING_OUTBOX = (
    "SELECT id, queue, task_name, task_id, payload, due_at FROM outbox "
    "WHERE coalesce(due_at, created_at) <= now() - %s::interval ORDER BY id LIMIT %s "
    "FOR UPDATE SKIP LOCKED"
)


# ---- Cron fires: scheduler.beat.crons ----

MOVE_NEXT_FIRES = (
    "UPDATE jobs SET next_fire_at = n.next_fire_at "
    "FROM unnest(%b::uuid[], %b::timestamptz[]) AS n(id, next_fire_at) WHERE jobs.id = n.id"
)

INSERT_FIRES = (
    "INSERT INTO fires (job_id, fire_at, outcome, trigger, reason, run_id, recorded_at) "
    "SELECT * FROM unnest(%b::uuid[], %b::timestamptz[], %b::text[], %b::text[], %b::text[], "
    "%b::uuid[], %b::timestamptz[]) ON CONFLICT DO NOTHING RETURNING job_id, fire_at"
)


# Ends the engine's writes in their own pipeline (``scheduler.engine.writer``).
COMMIT = "COMMIT"


# ---- Flow control (issue 16): scheduler.services.flow_admission ----

READ_FLOW_LIMITS = 'SELECT key, "limit", per_s, weight FROM flow_limits'

# One lock per key, taken in key order, held to the commit: admissions on a key happen
# one transaction at a time, whichever engine or beat runs them.
LOCK_FLOW_KEYS = (
    "SELECT pg_advisory_xact_lock(hashtextextended(k, 16)) "
    "FROM unnest(%s::text[]) AS k ORDER BY k"
)

# A candidate's keys beyond those locked: taken if free now, else it waits for a pass
# that holds them (never a wait, so never a deadlock between two passes).
TRY_LOCK_FLOW_KEY = "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 16))"

# A held attempt keeps the place it first took (``seq``) when it is held again; it waits
# only for the keys its attempt does not hold yet (one admitted, then dispatched by a
# ``redeliver``, waits for none).
INSERT_FLOW_WAITERS = (
    "INSERT INTO flow_waiters (key, task_run_id, run_id, task, attempt, tenant, priority, "
    "stated_limit, stated_per_s, since) "
    "SELECT * FROM unnest(%b::text[], %b::uuid[], %b::uuid[], %b::text[], %b::int[], "
    "%b::text[], %b::int[], %b::int[], %b::float8[], %b::timestamptz[]) "
    "AS w(key, task_run_id, run_id, task, attempt, tenant, priority, stated_limit, "
    "stated_per_s, since) "
    "WHERE NOT EXISTS (SELECT FROM flow_slots AS s WHERE s.key = w.key "
    "  AND s.task_run_id = w.task_run_id AND s.attempt = w.attempt) "
    "ON CONFLICT (key, task_run_id) DO NOTHING"
)

# The slots an attempt holds (rate keys too: they mark it admitted). An attempt admitted
# in a lane and sent again (a ``redeliver``) leaves it: sent alone it could run beside
# the lane's others, so its slots go and it waits again.
HELD_FLOW_SLOTS = (
    "WITH unlaned AS (DELETE FROM flow_slots WHERE task_run_id = ANY(%(ids)s) "
    "  AND lane IS NOT NULL) "
    "SELECT task_run_id, attempt, key FROM flow_slots WHERE task_run_id = ANY(%(ids)s) "
    "AND lane IS NULL"
)

# Starts on each rated key within its window (key, window in seconds, count).
FLOW_RATE_USAGE = (
    "SELECT r.key, r.per, (SELECT count(*) FROM flow_starts AS s WHERE s.key = r.key "
    "  AND s.at > %s::timestamptz - make_interval(secs => r.per)) "
    "FROM unnest(%s::text[], %s::float8[]) AS r(key, per)"
)

# The flow tables are queues: they swing from empty to thousands of rows and back, and
# an ANALYZE (autovacuum's, after every drain) that finds only dead rows leaves PostgreSQL
# believing them empty whatever they hold later. Every index then costs the same, and
# the planner took the primary key for a read by key: a scan and sort of every waiter
# of the key, 5-18 ms an admission instead of 0.3 (issue 16). So each read by key asks
# for the order of ``ix_flow_waiters_order``, and runs with sorts off (``PIN_ORDER``,
# ``UNPIN_ORDER`` after it in the same transaction): only that index gives the order.
PIN_ORDER = "SET LOCAL enable_sort = off"
UNPIN_ORDER = "RESET enable_sort"

# For the same reason the statements that take or drop attempts' rows by id
# (``RELEASE_FLOW``, ``TAKE_FLOW_SLOTS``) run with sequential scans off (``PIN_INDEX``,
# ``UNPIN_INDEX``): on statistics from an empty queue the planner scanned all 10,000
# waiters for each admission of a lane's 200, 5 ms a call instead of a probe per id.
PIN_INDEX = "SET LOCAL enable_seqscan = off"
UNPIN_INDEX = "RESET enable_seqscan"

# The first waiters of every tenant on each key, in the order they may start, each
# with every key it waits for (and the limits it states). The tenants of a key are found
# by skipping through the (key, tenant, ...) index, one probe per tenant: a DISTINCT
# read every waiter of the key, and 10,000 waiters made each admission cost milliseconds.
# Run between ``PIN_ORDER`` and ``UNPIN_ORDER``.
FLOW_CANDIDATES = (
    "WITH RECURSIVE tenants AS ("
    "  SELECT k.key, (SELECT f.tenant FROM flow_waiters AS f WHERE f.key = k.key "
    "    ORDER BY f.tenant LIMIT 1) AS tenant FROM unnest(%s::text[]) AS k(key) "
    "  UNION ALL "
    "  SELECT t.key, (SELECT f.tenant FROM flow_waiters AS f WHERE f.key = t.key "
    "    AND f.tenant > t.tenant ORDER BY f.tenant LIMIT 1) "
    "  FROM tenants AS t WHERE t.tenant IS NOT NULL) "
    "SELECT w.key, w.task_run_id, w.run_id, w.task, w.attempt, w.tenant, w.priority, w.seq, "
    "  n.keys, n.limits, n.pers "
    "FROM tenants AS t CROSS JOIN LATERAL (SELECT * FROM flow_waiters AS f "
    "  WHERE f.key = t.key AND f.tenant = t.tenant ORDER BY f.priority DESC, f.seq "
    "  LIMIT %s) AS w "
    "CROSS JOIN LATERAL (SELECT array_agg(o.key ORDER BY o.key) AS keys, "
    "  array_agg(o.stated_limit ORDER BY o.key) AS limits, "
    "  array_agg(o.stated_per_s ORDER BY o.key) AS pers "
    "  FROM flow_waiters AS o WHERE o.task_run_id = w.task_run_id) AS n "
    "WHERE t.tenant IS NOT NULL"
)

# Slots held on keys, by key and tenant: a key's usage and each tenant's share. A lane
# (attempts admitted together to run one at a time, ``lane`` their lead) is one slot.
FLOW_USAGE = (
    "SELECT key, tenant, count(DISTINCT coalesce(lane, task_run_id)) FROM flow_slots "
    "WHERE key = ANY(%s) GROUP BY key, tenant"
)

# Slots in use by key, lanes counted once (``/limits``, ``/metrics``).
FLOW_SLOTS_BY_KEY = (
    "SELECT key, count(DISTINCT coalesce(lane, task_run_id)) FROM flow_slots GROUP BY key"
)

# The slots of attempts that ended and their waits go; the keys they had, for admission.
# The attempts are matched as a set (``IN (SELECT unnest ...)``), not with ``= ANY``: were
# the table scanned after all, ``= ANY`` compares each row with every element (10,000
# waiters and a lane's 200 attempts: 120-180 ms a call). Run between ``PIN_INDEX`` and
# ``UNPIN_INDEX``.
RELEASE_FLOW = (
    "WITH slots AS (DELETE FROM flow_slots WHERE task_run_id IN (SELECT unnest(%(ids)s::uuid[])) "
    "  RETURNING key), "
    "waits AS (DELETE FROM flow_waiters WHERE task_run_id IN (SELECT unnest(%(ids)s::uuid[])) "
    "  RETURNING key) "
    "SELECT key FROM slots UNION SELECT key FROM waits"
)

# Admitted: their waits gone (matched as a set: ``RELEASE_FLOW``), a slot of every key
# they waited for (rate keys too: they mark them admitted) and a start on each rated key;
# one statement, run between ``PIN_INDEX`` and ``UNPIN_INDEX``. Slots only for the
# attempts whose waits it deleted: a wait deleted meanwhile went with its task run
# (migration 0020's trigger, which waits for this statement on the wait's row or is
# waited for), and a slot of its attempt would never be released.
TAKE_FLOW_SLOTS = (
    "WITH waits AS (DELETE FROM flow_waiters WHERE task_run_id IN (SELECT unnest(%b::uuid[])) "
    "  RETURNING task_run_id), "
    "slots AS (INSERT INTO flow_slots (key, task_run_id, attempt, tenant, at, lane) "
    "  SELECT * FROM unnest(%b::text[], %b::uuid[], %b::int[], %b::text[], %b::timestamptz[], "
    "  %b::uuid[]) AS s(key, task_run_id, attempt, tenant, at, lane) "
    "  WHERE s.task_run_id IN (SELECT task_run_id FROM waits) ON CONFLICT DO NOTHING) "
    "INSERT INTO flow_starts (key, at) SELECT * FROM unnest(%b::text[], %b::timestamptz[])"
)

# ---- Limits on a type or tenant count what already runs: scheduler.services.flow_limits,
# scheduler.beat.flow ----

# Attempts in flight (READY and not held, or ACTIVE) of the limited type or tenant take a
# slot of its key, as if admitted under it: the limit counts them from its first second.
# A dispatched READY attempt has a claim check, an ACTIVE one a deadline: their partial
# indexes find the attempts in flight without reading the finished ones.
_IN_FLIGHT_OF_JOBS = (
    "SELECT %(key)s, t.id, t.attempt, j.tenant, %(now)s FROM task_runs AS t "
    "JOIN tasks AS d ON d.id = t.task_id JOIN runs AS r ON r.id = t.run_id "
    "JOIN jobs AS j ON j.id = r.job_id "
    "WHERE (t.claim_check_at IS NOT NULL OR t.deadline_at IS NOT NULL) "
    "AND t.state IN ('READY', 'ACTIVE') AND t.waiting_for IS NULL "
)
# The task runs are locked as a foreign key would (``FOR KEY SHARE``): one deleted
# meanwhile is skipped, not given a slot nobody would release (migration 0020).
ADOPT_TYPE_SLOTS = (
    "INSERT INTO flow_slots (key, task_run_id, attempt, tenant, at) " + _IN_FLIGHT_OF_JOBS
    + "AND coalesce(nullif(d.binding ->> 'engine', ''), d.type) = %(name)s "
    "FOR KEY SHARE OF t ON CONFLICT DO NOTHING"
)
ADOPT_TENANT_SLOTS = (
    "INSERT INTO flow_slots (key, task_run_id, attempt, tenant, at) " + _IN_FLIGHT_OF_JOBS
    + "AND j.tenant = %(name)s FOR KEY SHARE OF t ON CONFLICT DO NOTHING"
)

# The limits that count what already runs (a type's or a tenant's number, not a rate),
# and when each was set: filtered by time here and in ``WATCH_DUE``'s probe of them.
_ADOPTING_LIMITS = (
    "SELECT key, updated_at FROM flow_limits WHERE \"limit\" IS NOT NULL "
    "AND (starts_with(key, 'type:') OR starts_with(key, 'tenant:'))"
)

# Type and tenant limits set or changed since a time, and when: the beat adopts for them
# again while the engines' caches of the limits (a second old at most) catch up.
RECENTLY_LIMITED = _ADOPTING_LIMITS + " AND updated_at > %s"

# Slots of attempts no longer in flight (READY or ACTIVE), of an earlier attempt, or of
# a task run that is gone.
_SLOTS_OUT_OF_FLIGHT = (
    "DELETE FROM flow_slots AS s WHERE NOT EXISTS (SELECT FROM task_runs AS t "
    "  WHERE t.id = s.task_run_id AND t.state IN ('READY', 'ACTIVE') "
    "  AND t.attempt = s.attempt)"
)

# ... and those of the recently limited keys: an engine whose cache did not know the
# limit yet ended them without a release, or one ended while an adoption that had read
# it in flight was committing.
RELEASE_LEFT_SLOTS = _SLOTS_OUT_OF_FLIGHT + " AND s.key = ANY(%s)"

# The keys anything waits for, one index probe per key (the beat asks every second; a
# DISTINCT would read every waiter). Run between ``PIN_ORDER`` and ``UNPIN_ORDER``.
# Not a concurrency key an engine took a slot of since %s: engines admit on it as its
# slots are released, in lanes, where the beat's pass would fill the slots they leave
# for their next read with single attempts.
WAITING_FLOW_KEYS = (
    "WITH RECURSIVE k AS ("
    "  (SELECT key FROM flow_waiters ORDER BY key LIMIT 1) "
    "  UNION ALL "
    "  SELECT (SELECT f.key FROM flow_waiters AS f WHERE f.key > k.key ORDER BY f.key LIMIT 1) "
    "  FROM k WHERE k.key IS NOT NULL) "
    "SELECT key FROM k WHERE key IS NOT NULL AND (key LIKE 'rate:%%' OR NOT EXISTS ("
    "  SELECT 1 FROM flow_slots AS s WHERE s.key = k.key AND s.at > %s))"
)

PRUNE_FLOW_STARTS = "DELETE FROM flow_starts WHERE at < %s"

# ---- Flow control's repair on engine start: scheduler.engine.repair ----

# Slots of attempts no longer in flight (READY or ACTIVE), waits of attempts no longer
# READY, either of a task run gone: what a bug or a manual change could leave; every end
# releases its own, and a task run's deletion takes its rows (migration 0020).
REPAIR_FLOW_SLOTS = _SLOTS_OUT_OF_FLIGHT

REPAIR_FLOW_WAITERS = (
    "DELETE FROM flow_waiters AS w WHERE NOT EXISTS (SELECT FROM task_runs AS t "
    "  WHERE t.id = w.task_run_id AND t.state = 'READY' AND t.attempt = w.attempt)"
)

# Held attempts with no wait recorded: sent through the gate again.
UNRECORDED_HELD = (
    "SELECT t.run_id, t.name, t.attempt FROM task_runs AS t WHERE t.state = 'READY' "
    "AND t.waiting_for IS NOT NULL "
    "AND NOT EXISTS (SELECT FROM flow_waiters AS w WHERE w.task_run_id = t.id)"
)


# ---- The beat's probes: scheduler.beat.ticker ----

# The beat's probes ask for the earliest due time, not whether one row is due: ``min``
# of an indexed column is one step into its (partial) index whatever the statistics
# say. ``EXISTS (... WHERE retry_at <= $1)`` was planned once per connection, generic,
# at a third of the rows with a retry time: a sequential scan that stops at the first
# match looked cheaper than the index, and with every retry time in the future it read
# all of ``task_runs``, five times a second (3-5 ms here; a large table's whole size).
def _due(column: str, table: str, bound: str, where: str = "") -> str:
    """SQL true when the earliest ``column`` of ``table`` (``where``) is at most ``bound``."""
    return f"coalesce((SELECT min({column}) FROM {table}{where}) <= {bound}, false)"


# What the beat's firing duties would find by ``:horizon``, in one round trip: a step
# with nothing due (most of an idle beat's five a second) runs none of them.
FIRING_DUE = (
    "SELECT " + _due("next_fire_at", "jobs", "%(horizon)s") + " AS crons, "
    "EXISTS (SELECT 1 FROM fires WHERE outcome = 'buffered') AS buffered, "
    + _due("scheduled_for", "runs", "%(horizon)s",
           " WHERE state = 'READY' AND activation_sent_at IS NULL") + " AS runs, "
    + _due("retry_at", "task_runs", "%(horizon)s") + " AS retries"
)

# What the beat's once-a-tick watch duties would find (``scheduler.beat.ticker``): the
# run timers, attempts past their deadline, suspension, resumption, lateness, passed
# leases, due claim checks, flow control in use. The same predicates as the duties' own
# claims; tests/integration/beat check each flag. (The last three ran their own queries
# every tick, two through the ORM: 4 of an idle tick's 6.3 ms of CPU.)
WATCH_DUE = text(
    "SELECT " + _due("cancel_requested_at", "runs", ":grace_over",
                     " WHERE state = 'CANCEL_REQUESTED' AND cancel_grace_sent_at IS NULL")
    + " AS cancel_grace, "
    + _due("timeout_at", "runs", ":now") + " AS run_timeouts, "
    + _due("deadline_at", "task_runs", ":now") + " AS attempt_timeouts, "
    + _due("suspend_due_at", "runs", ":now") + " AS suspend, "
    + _due("resume_due_at", "runs", ":now") + " AS resume, "
    + _due("late_at", "runs", ":now") + " AS late, "
    + _due("lease_expires_at", "task_runs", ":now") + " AS leases, "
    + _due("claim_check_at", "task_runs", ":now") + " AS claims, "
    "EXISTS (SELECT 1 FROM flow_waiters) OR EXISTS (SELECT 1 FROM flow_starts) AS flow, "
    "EXISTS (" + _ADOPTING_LIMITS + " AND updated_at > :limits_since) AS new_limits"
)


# ---- Jobs with a cap on unfinished runs: scheduler.beat.duties ----

# The due runs of capped jobs, oldest first, as many as each job has room for: its cap
# less its unfinished runs whose activation went out. The job's row is locked (another
# beat skips it, the API's run creation waits), so two beats never both fill its room.
CAPPED_DUE_RUNS = text(
    "WITH capped AS ("
    "  SELECT j.id, j.max_active_runs AS cap FROM jobs AS j "
    "  WHERE j.max_active_runs IS NOT NULL AND j.id IN (SELECT r.job_id FROM runs AS r "
    "    WHERE r.state = 'READY' AND r.activation_sent_at IS NULL "
    "    AND r.scheduled_for <= :horizon) "
    "  ORDER BY j.id FOR UPDATE OF j SKIP LOCKED) "
    "SELECT w.id, w.scheduled_for FROM capped AS c CROSS JOIN LATERAL ("
    "  SELECT r.id, r.scheduled_for FROM runs AS r WHERE r.job_id = c.id "
    "  AND r.state = 'READY' AND r.activation_sent_at IS NULL "
    "  AND r.scheduled_for <= :horizon ORDER BY r.scheduled_for, r.number "
    "  LIMIT greatest(0, c.cap - (SELECT count(*) FROM runs AS a WHERE a.job_id = c.id "
    "    AND a.finished_at IS NULL AND a.activation_sent_at IS NOT NULL))) AS w"
)
