-- Events and the definitions they start (see SCHEMA.md): workflows, their
-- published versions, activations, events recorded once per dedupe key,
-- and the deliveries each event pinned, naming the run each one starts.
-- The cause of a run is a join through flowstate_event_deliveries.run_id,
-- so flowstate_runs is left as it was. Charsets as in the first migration:
-- ids ascii, names and keys VARBINARY(255), JSON as JSON.
-- (`authorization_snapshot`: AUTHORIZATION is reserved on PostgreSQL, so
-- no dialect uses the bare word.)

CREATE TABLE IF NOT EXISTS flowstate_workflows (
    id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    app_id VARBINARY(255) NOT NULL,
    scope_id VARBINARY(255) NOT NULL,
    name VARBINARY(255) NOT NULL,
    enabled BOOLEAN NOT NULL,
    active_version_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY flowstate_workflows_app_scope_name (app_id, scope_id, name)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS flowstate_published_versions (
    id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    hash VARBINARY(255) NOT NULL,
    definition JSON NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY flowstate_published_versions_workflow_hash (workflow_id, hash),
    CONSTRAINT flowstate_published_versions_workflow_fk FOREIGN KEY (workflow_id)
        REFERENCES flowstate_workflows (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS flowstate_activations (
    id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    event_type VARBINARY(255) NOT NULL,
    enabled BOOLEAN NOT NULL,
    authorization_snapshot JSON NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (id),
    KEY flowstate_activations_type_workflow (event_type, workflow_id),
    KEY flowstate_activations_workflow_created (workflow_id, created_at, id),
    CONSTRAINT flowstate_activations_workflow_fk FOREIGN KEY (workflow_id)
        REFERENCES flowstate_workflows (id) ON DELETE CASCADE,
    CONSTRAINT flowstate_activations_version_fk FOREIGN KEY (version_id)
        REFERENCES flowstate_published_versions (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

-- NULL dedupe keys never collide, so the plain unique key is the dedupe.
CREATE TABLE IF NOT EXISTS flowstate_events (
    id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    app_id VARBINARY(255) NOT NULL,
    scope_id VARBINARY(255) NOT NULL,
    event_type VARBINARY(255) NOT NULL,
    data JSON NOT NULL,
    context JSON NOT NULL,
    authorization_snapshot JSON NOT NULL,
    target_workflow_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
    dedupe_key VARBINARY(255) NULL,
    occurred_at BIGINT NOT NULL,
    matched BIGINT NOT NULL,
    dispatched_at BIGINT NULL,
    attempts BIGINT NOT NULL,
    last_error TEXT NULL,
    dispatch_after BIGINT NOT NULL,
    dead_lettered_at BIGINT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY flowstate_events_dedupe (app_id, scope_id, event_type, dedupe_key),
    KEY flowstate_events_pending (dispatched_at, dead_lettered_at, dispatch_after),
    KEY flowstate_events_occurred (occurred_at, id)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS flowstate_event_deliveries (
    event_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    activation_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    workflow_name VARBINARY(255) NOT NULL,
    version_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    version_hash VARBINARY(255) NOT NULL,
    authorization_snapshot JSON NOT NULL,
    run_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    PRIMARY KEY (event_id, activation_id),
    UNIQUE KEY flowstate_event_deliveries_run (run_id),
    CONSTRAINT flowstate_event_deliveries_event_fk FOREIGN KEY (event_id)
        REFERENCES flowstate_events (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin;
