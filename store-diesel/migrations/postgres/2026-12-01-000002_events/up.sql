-- Events and the definitions they start (see SCHEMA.md): workflows, their
-- published versions, activations, events recorded once per dedupe key,
-- and the deliveries each event pinned, naming the run each one starts.
-- The cause of a run is a join through flowstate_event_deliveries.run_id,
-- so flowstate_runs is left as it was.

CREATE TABLE flowstate_workflows (
    id                TEXT COLLATE "C" PRIMARY KEY,
    app_id            TEXT COLLATE "C" NOT NULL,
    scope_id          TEXT COLLATE "C" NOT NULL,
    name              TEXT COLLATE "C" NOT NULL,
    enabled           BOOLEAN NOT NULL,
    active_version_id TEXT COLLATE "C",
    created_at        BIGINT NOT NULL,
    CONSTRAINT flowstate_workflows_app_scope_name_key UNIQUE (app_id, scope_id, name)
);

CREATE TABLE flowstate_published_versions (
    id          TEXT COLLATE "C" PRIMARY KEY,
    workflow_id TEXT COLLATE "C" NOT NULL REFERENCES flowstate_workflows (id) ON DELETE CASCADE,
    hash        TEXT COLLATE "C" NOT NULL,
    definition  JSONB NOT NULL,
    created_at  BIGINT NOT NULL,
    CONSTRAINT flowstate_published_versions_workflow_hash_key UNIQUE (workflow_id, hash)
);

CREATE TABLE flowstate_activations (
    id            TEXT COLLATE "C" PRIMARY KEY,
    workflow_id   TEXT COLLATE "C" NOT NULL REFERENCES flowstate_workflows (id) ON DELETE CASCADE,
    version_id    TEXT COLLATE "C" NOT NULL REFERENCES flowstate_published_versions (id) ON DELETE CASCADE,
    event_type    TEXT COLLATE "C" NOT NULL,
    enabled       BOOLEAN NOT NULL,
    authorization_snapshot JSONB NOT NULL,
    created_at    BIGINT NOT NULL
);
CREATE INDEX flowstate_activations_type_workflow_idx ON flowstate_activations (event_type, workflow_id);
CREATE INDEX flowstate_activations_workflow_created_idx ON flowstate_activations (workflow_id, created_at, id);

-- NULL dedupe keys never collide, so the plain unique key is the dedupe.
CREATE TABLE flowstate_events (
    id                 TEXT COLLATE "C" PRIMARY KEY,
    app_id             TEXT COLLATE "C" NOT NULL,
    scope_id           TEXT COLLATE "C" NOT NULL,
    event_type         TEXT COLLATE "C" NOT NULL,
    data               JSONB NOT NULL,
    context            JSONB NOT NULL,
    authorization_snapshot JSONB NOT NULL,
    target_workflow_id TEXT COLLATE "C",
    dedupe_key         TEXT COLLATE "C",
    occurred_at        BIGINT NOT NULL,
    matched            BIGINT NOT NULL,
    dispatched_at      BIGINT,
    attempts           BIGINT NOT NULL,
    last_error         TEXT,
    dispatch_after     BIGINT NOT NULL,
    dead_lettered_at   BIGINT,
    CONSTRAINT flowstate_events_dedupe_key UNIQUE (app_id, scope_id, event_type, dedupe_key)
);
CREATE INDEX flowstate_events_pending_idx ON flowstate_events (dispatched_at, dead_lettered_at, dispatch_after);
CREATE INDEX flowstate_events_occurred_idx ON flowstate_events (occurred_at, id);

CREATE TABLE flowstate_event_deliveries (
    event_id      TEXT COLLATE "C" NOT NULL REFERENCES flowstate_events (id) ON DELETE CASCADE,
    activation_id TEXT COLLATE "C" NOT NULL,
    workflow_id   TEXT COLLATE "C" NOT NULL,
    workflow_name TEXT COLLATE "C" NOT NULL,
    version_id    TEXT COLLATE "C" NOT NULL,
    version_hash  TEXT COLLATE "C" NOT NULL,
    authorization_snapshot JSONB NOT NULL,
    run_id        TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (event_id, activation_id),
    CONSTRAINT flowstate_event_deliveries_run_key UNIQUE (run_id)
);
