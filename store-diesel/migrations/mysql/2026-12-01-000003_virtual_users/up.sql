-- Virtual users on MySQL 8 and MariaDB 10.6+ (see SCHEMA.md), in the
-- initial schema's conventions: IF NOT EXISTS everywhere (DDL is not
-- transactional), ids ascii CHAR(36), names VARBINARY(255) (byte-exact),
-- JSON as JSON, a failure reason as MEDIUMTEXT (it may be as long as any
-- value the limits allow, 1 MiB by default, past TEXT's 64 KiB).

CREATE TABLE IF NOT EXISTS flowstate_virtual_user_schedules (
    persona VARBINARY(255) NOT NULL,
    enabled BOOLEAN NOT NULL,
    min_interval_ms BIGINT NOT NULL,
    max_interval_ms BIGINT NOT NULL,
    next_run_at BIGINT NOT NULL,
    last_run_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (persona),
    KEY flowstate_virtual_user_schedules_due (enabled, next_run_at, persona)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS flowstate_virtual_user_runs (
    id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    persona VARBINARY(255) NOT NULL,
    status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    findings JSON NULL,
    failure MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    transcript_len BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (id),
    KEY flowstate_virtual_user_runs_persona_created (persona, created_at, id),
    KEY flowstate_virtual_user_runs_status_created (status, created_at, id),
    KEY flowstate_virtual_user_runs_created (created_at, id)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS flowstate_virtual_user_transcript (
    run_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    seq BIGINT NOT NULL,
    entry JSON NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq),
    CONSTRAINT flowstate_virtual_user_transcript_run_fk FOREIGN KEY (run_id)
        REFERENCES flowstate_virtual_user_runs (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;
