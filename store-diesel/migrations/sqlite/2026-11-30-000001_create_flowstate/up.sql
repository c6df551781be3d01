-- flowstate's schema on SQLite (see SCHEMA.md for the logical schema).
--
-- STRICT tables: a column holds the type it declares or the write fails,
-- so a hand-written text timestamp or a real-valued counter cannot creep in.
-- Ids are uuid TEXT, timestamps INTEGER microseconds since the epoch (UTC),
-- counters INTEGER (64-bit). Text compares with the BINARY collation, so
-- names and keys are byte-exact ("a" and "A" are two keys).
--
-- JSON is TEXT with CHECK (json_valid(col)): PostgreSQL's jsonb and MySQL's
-- JSON refuse a value that is not JSON, and so does this schema, even for a
-- row written by hand. The store only writes what serde_json produced, so
-- the check never refuses a port call; SQLite evaluates it only when the
-- column is written (an UPDATE of status does not re-parse the input).
-- Status columns carry no CHECK on purpose: the readers report an unknown
-- status as a typed Corrupt error naming the row, and the core enums stay
-- the single list of statuses.
--
-- Foreign keys need PRAGMA foreign_keys = ON, which the store sets on every
-- connection it opens.

CREATE TABLE flowstate_runs (
    id              TEXT    NOT NULL PRIMARY KEY,
    workflow        TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    input           TEXT    NOT NULL CHECK (json_valid(input)),
    graph_hash      TEXT,
    parent_id       TEXT    REFERENCES flowstate_runs (id) ON DELETE SET NULL,
    idempotency_key TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX flowstate_runs_idempotency_key ON flowstate_runs (idempotency_key);
CREATE INDEX flowstate_runs_status_created ON flowstate_runs (status, created_at, id);
CREATE INDEX flowstate_runs_workflow_status_created ON flowstate_runs (workflow, status, created_at, id);
CREATE INDEX flowstate_runs_parent_status ON flowstate_runs (parent_id, status);
CREATE INDEX flowstate_runs_workflow_created ON flowstate_runs (workflow, created_at, id);
CREATE INDEX flowstate_runs_parent_created ON flowstate_runs (parent_id, created_at, id);
-- The unfiltered listing, newest first, walks this one backwards.
CREATE INDEX flowstate_runs_created ON flowstate_runs (created_at, id);

CREATE TABLE flowstate_run_state (
    run_id    TEXT NOT NULL REFERENCES flowstate_runs (id) ON DELETE CASCADE,
    state_key TEXT NOT NULL,
    value     TEXT NOT NULL CHECK (json_valid(value)),
    PRIMARY KEY (run_id, state_key)
) STRICT;

CREATE TABLE flowstate_steps (
    id              TEXT    NOT NULL PRIMARY KEY,
    run_id          TEXT    NOT NULL REFERENCES flowstate_runs (id) ON DELETE CASCADE,
    name            TEXT    NOT NULL,
    function_name   TEXT,
    status          TEXT    NOT NULL,
    input           TEXT    NOT NULL CHECK (json_valid(input)),
    result          TEXT    CHECK (json_valid(result)),
    error           TEXT    CHECK (json_valid(error)),
    current_attempt INTEGER NOT NULL DEFAULT 1,
    retries         INTEGER NOT NULL,
    retry_delay_ms  INTEGER,
    branch_taken    TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX flowstate_steps_run_name ON flowstate_steps (run_id, name);
CREATE INDEX flowstate_steps_run_status ON flowstate_steps (run_id, status);

CREATE TABLE flowstate_step_history (
    id           TEXT    NOT NULL PRIMARY KEY,
    step_id      TEXT    NOT NULL REFERENCES flowstate_steps (id) ON DELETE CASCADE,
    attempt      INTEGER NOT NULL,
    status       TEXT    NOT NULL,
    result       TEXT    CHECK (json_valid(result)),
    error        TEXT    CHECK (json_valid(error)),
    created_at   INTEGER NOT NULL,
    scheduled_at INTEGER,
    running_at   INTEGER,
    succeeded_at INTEGER,
    failed_at    INTEGER
) STRICT;

CREATE UNIQUE INDEX flowstate_step_history_step_attempt ON flowstate_step_history (step_id, attempt);
CREATE INDEX flowstate_step_history_step_created ON flowstate_step_history (step_id, created_at);

CREATE TABLE flowstate_workflow_versions (
    id         TEXT    NOT NULL PRIMARY KEY,
    workflow   TEXT    NOT NULL,
    graph_hash TEXT    NOT NULL,
    graph      TEXT    NOT NULL CHECK (json_valid(graph)),
    created_at INTEGER NOT NULL
) STRICT;

CREATE UNIQUE INDEX flowstate_workflow_versions_workflow_hash ON flowstate_workflow_versions (workflow, graph_hash);
