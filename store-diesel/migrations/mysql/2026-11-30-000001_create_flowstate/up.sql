-- flowstate's schema for MySQL 8 and MariaDB 10.6+ (see SCHEMA.md).
--
-- MySQL's DDL is not transactional: a run that fails half-way leaves the
-- tables it made, so every CREATE says IF NOT EXISTS and running this file
-- again finishes the job.
--
-- Character sets are stated on every column, so the database's default
-- charset and collation never matter:
-- - ids are uuid text, `CHAR(36) CHARACTER SET ascii COLLATE ascii_bin`;
-- - names and keys (workflow, step name, function, state key, idempotency
--   key, graph hash, branch) are `VARBINARY(255)`: compared byte for byte.
--   `utf8mb4_bin` is not enough: it is a PAD SPACE collation on both MySQL
--   and MariaDB, so 'a' and 'a ' would be one key. The store only ever binds
--   valid UTF-8, and the 255 bytes match JsonLimits' default key limit;
-- - JSON is `JSON` (on MariaDB an alias of LONGTEXT with a JSON_VALID check),
--   read back as text.

CREATE TABLE IF NOT EXISTS flowstate_runs (
    id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow VARBINARY(255) NOT NULL,
    status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    input JSON NOT NULL,
    graph_hash VARBINARY(255) NULL,
    parent_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
    idempotency_key VARBINARY(255) NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY flowstate_runs_idempotency_key (idempotency_key),
    KEY flowstate_runs_created (created_at, id),
    KEY flowstate_runs_status_created (status, created_at, id),
    KEY flowstate_runs_workflow_status_created (workflow, status, created_at, id),
    KEY flowstate_runs_parent_status (parent_id, status),
    KEY flowstate_runs_workflow_created (workflow, created_at, id),
    KEY flowstate_runs_parent_created (parent_id, created_at, id),
    CONSTRAINT flowstate_runs_parent_fk FOREIGN KEY (parent_id)
        REFERENCES flowstate_runs (id) ON DELETE SET NULL
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS flowstate_run_state (
    run_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    state_key VARBINARY(255) NOT NULL,
    value JSON NOT NULL,
    PRIMARY KEY (run_id, state_key),
    CONSTRAINT flowstate_run_state_run_fk FOREIGN KEY (run_id)
        REFERENCES flowstate_runs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS flowstate_steps (
    id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    run_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    name VARBINARY(255) NOT NULL,
    function_name VARBINARY(255) NULL,
    status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    input JSON NOT NULL,
    result JSON NULL,
    error JSON NULL,
    current_attempt BIGINT NOT NULL DEFAULT 1,
    retries BIGINT NOT NULL,
    retry_delay_ms BIGINT NULL,
    branch_taken VARBINARY(255) NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY flowstate_steps_run_name (run_id, name),
    KEY flowstate_steps_run_status (run_id, status),
    CONSTRAINT flowstate_steps_run_fk FOREIGN KEY (run_id)
        REFERENCES flowstate_runs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS flowstate_step_history (
    id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    step_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempt BIGINT NOT NULL,
    status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    result JSON NULL,
    error JSON NULL,
    created_at BIGINT NOT NULL,
    scheduled_at BIGINT NULL,
    running_at BIGINT NULL,
    succeeded_at BIGINT NULL,
    failed_at BIGINT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY flowstate_step_history_step_attempt (step_id, attempt),
    KEY flowstate_step_history_step_created (step_id, created_at),
    CONSTRAINT flowstate_step_history_step_fk FOREIGN KEY (step_id)
        REFERENCES flowstate_steps (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS flowstate_workflow_versions (
    id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow VARBINARY(255) NOT NULL,
    graph_hash VARBINARY(255) NOT NULL,
    graph JSON NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY flowstate_workflow_versions_workflow_hash (workflow, graph_hash)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;
