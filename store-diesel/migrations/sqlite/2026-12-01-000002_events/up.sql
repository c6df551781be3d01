-- Events and the definitions they start (see SCHEMA.md): workflows, their
-- published versions, activations, events recorded once per dedupe key,
-- and the deliveries each event pinned, naming the run each one starts.
-- The cause of a run is a join through flowstate_event_deliveries.run_id,
-- so flowstate_runs is left as it was. Booleans are INTEGER 0/1.

CREATE TABLE flowstate_workflows (
    id                TEXT    NOT NULL PRIMARY KEY,
    app_id            TEXT    NOT NULL,
    scope_id          TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    enabled           INTEGER NOT NULL,
    active_version_id TEXT,
    created_at        INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX flowstate_workflows_app_scope_name ON flowstate_workflows (app_id, scope_id, name);

CREATE TABLE flowstate_published_versions (
    id          TEXT    NOT NULL PRIMARY KEY,
    workflow_id TEXT    NOT NULL REFERENCES flowstate_workflows (id) ON DELETE CASCADE,
    hash        TEXT    NOT NULL,
    definition  TEXT    NOT NULL CHECK (json_valid(definition)),
    created_at  INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX flowstate_published_versions_workflow_hash ON flowstate_published_versions (workflow_id, hash);

CREATE TABLE flowstate_activations (
    id            TEXT    NOT NULL PRIMARY KEY,
    workflow_id   TEXT    NOT NULL REFERENCES flowstate_workflows (id) ON DELETE CASCADE,
    version_id    TEXT    NOT NULL REFERENCES flowstate_published_versions (id) ON DELETE CASCADE,
    event_type    TEXT    NOT NULL,
    enabled       INTEGER NOT NULL,
    authorization_snapshot TEXT    NOT NULL CHECK (json_valid(authorization_snapshot)),
    created_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX flowstate_activations_type_workflow ON flowstate_activations (event_type, workflow_id);
CREATE INDEX flowstate_activations_workflow_created ON flowstate_activations (workflow_id, created_at, id);

-- NULL dedupe keys never collide, so the plain unique index is the dedupe.
CREATE TABLE flowstate_events (
    id                 TEXT    NOT NULL PRIMARY KEY,
    app_id             TEXT    NOT NULL,
    scope_id           TEXT    NOT NULL,
    event_type         TEXT    NOT NULL,
    data               TEXT    NOT NULL CHECK (json_valid(data)),
    context            TEXT    NOT NULL CHECK (json_valid(context)),
    authorization_snapshot TEXT    NOT NULL CHECK (json_valid(authorization_snapshot)),
    target_workflow_id TEXT,
    dedupe_key         TEXT,
    occurred_at        INTEGER NOT NULL,
    matched            INTEGER NOT NULL,
    dispatched_at      INTEGER,
    attempts           INTEGER NOT NULL,
    last_error         TEXT,
    dispatch_after     INTEGER NOT NULL,
    dead_lettered_at   INTEGER
) STRICT;
CREATE UNIQUE INDEX flowstate_events_dedupe ON flowstate_events (app_id, scope_id, event_type, dedupe_key);
CREATE INDEX flowstate_events_pending ON flowstate_events (dispatched_at, dead_lettered_at, dispatch_after);
CREATE INDEX flowstate_events_occurred ON flowstate_events (occurred_at, id);

CREATE TABLE flowstate_event_deliveries (
    event_id      TEXT NOT NULL REFERENCES flowstate_events (id) ON DELETE CASCADE,
    activation_id TEXT NOT NULL,
    workflow_id   TEXT NOT NULL,
    workflow_name TEXT NOT NULL,
    version_id    TEXT NOT NULL,
    version_hash  TEXT NOT NULL,
    authorization_snapshot TEXT NOT NULL CHECK (json_valid(authorization_snapshot)),
    run_id        TEXT NOT NULL,
    PRIMARY KEY (event_id, activation_id)
) STRICT;
CREATE UNIQUE INDEX flowstate_event_deliveries_run ON flowstate_event_deliveries (run_id);
