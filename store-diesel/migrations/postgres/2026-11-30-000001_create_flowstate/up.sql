-- flowstate's initial schema on PostgreSQL (see store-diesel/SCHEMA.md).
-- Ids and names are TEXT compared byte for byte (COLLATE "C"), timestamps
-- BIGINT microseconds since the epoch (UTC), JSON jsonb.

CREATE TABLE flowstate_runs (
    id              TEXT COLLATE "C" PRIMARY KEY,
    workflow        TEXT COLLATE "C" NOT NULL,
    status          TEXT COLLATE "C" NOT NULL,
    input           JSONB NOT NULL,
    graph_hash      TEXT COLLATE "C",
    parent_id       TEXT COLLATE "C" REFERENCES flowstate_runs (id) ON DELETE SET NULL,
    idempotency_key TEXT COLLATE "C",
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    CONSTRAINT flowstate_runs_idempotency_key_key UNIQUE (idempotency_key)
);
CREATE INDEX flowstate_runs_status_created_idx ON flowstate_runs (status, created_at, id);
CREATE INDEX flowstate_runs_workflow_status_created_idx ON flowstate_runs (workflow, status, created_at, id);
CREATE INDEX flowstate_runs_parent_status_idx ON flowstate_runs (parent_id, status);
CREATE INDEX flowstate_runs_workflow_created_idx ON flowstate_runs (workflow, created_at, id);
CREATE INDEX flowstate_runs_parent_created_idx ON flowstate_runs (parent_id, created_at, id);
-- The unfiltered listing, newest first, walks this one backwards.
CREATE INDEX flowstate_runs_created_idx ON flowstate_runs (created_at, id);

CREATE TABLE flowstate_run_state (
    run_id    TEXT COLLATE "C" NOT NULL REFERENCES flowstate_runs (id) ON DELETE CASCADE,
    state_key TEXT COLLATE "C" NOT NULL,
    value     JSONB NOT NULL,
    PRIMARY KEY (run_id, state_key)
);

CREATE TABLE flowstate_steps (
    id              TEXT COLLATE "C" PRIMARY KEY,
    run_id          TEXT COLLATE "C" NOT NULL REFERENCES flowstate_runs (id) ON DELETE CASCADE,
    name            TEXT COLLATE "C" NOT NULL,
    function_name   TEXT COLLATE "C",
    status          TEXT COLLATE "C" NOT NULL,
    input           JSONB NOT NULL,
    result          JSONB,
    error           JSONB,
    current_attempt BIGINT NOT NULL DEFAULT 1,
    retries         BIGINT NOT NULL DEFAULT 0,
    retry_delay_ms  BIGINT,
    branch_taken    TEXT COLLATE "C",
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    CONSTRAINT flowstate_steps_run_name_key UNIQUE (run_id, name)
);
CREATE INDEX flowstate_steps_run_status_idx ON flowstate_steps (run_id, status);

CREATE TABLE flowstate_step_history (
    id           TEXT COLLATE "C" PRIMARY KEY,
    step_id      TEXT COLLATE "C" NOT NULL REFERENCES flowstate_steps (id) ON DELETE CASCADE,
    attempt      BIGINT NOT NULL,
    status       TEXT COLLATE "C" NOT NULL,
    result       JSONB,
    error        JSONB,
    created_at   BIGINT NOT NULL,
    scheduled_at BIGINT,
    running_at   BIGINT,
    succeeded_at BIGINT,
    failed_at    BIGINT,
    CONSTRAINT flowstate_step_history_step_attempt_key UNIQUE (step_id, attempt)
);
CREATE INDEX flowstate_step_history_step_created_idx ON flowstate_step_history (step_id, created_at);

CREATE TABLE flowstate_workflow_versions (
    id         TEXT COLLATE "C" PRIMARY KEY,
    workflow   TEXT COLLATE "C" NOT NULL,
    graph_hash TEXT COLLATE "C" NOT NULL,
    graph      JSONB NOT NULL,
    created_at BIGINT NOT NULL,
    CONSTRAINT flowstate_workflow_versions_workflow_hash_key UNIQUE (workflow, graph_hash)
);
