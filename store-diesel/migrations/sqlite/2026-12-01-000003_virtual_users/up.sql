-- Virtual users on SQLite (see SCHEMA.md), in the initial schema's
-- conventions: STRICT tables, uuid TEXT, INTEGER microseconds, JSON as
-- TEXT CHECK (json_valid(...)), a boolean as INTEGER 0 or 1.

CREATE TABLE flowstate_virtual_user_schedules (
    persona         TEXT    NOT NULL PRIMARY KEY,
    enabled         INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    min_interval_ms INTEGER NOT NULL,
    max_interval_ms INTEGER NOT NULL,
    next_run_at     INTEGER NOT NULL,
    last_run_id     TEXT,
    updated_at      INTEGER NOT NULL
) STRICT;

-- The due listing: enabled AND next_run_at <= now, earliest first.
CREATE INDEX flowstate_virtual_user_schedules_due ON flowstate_virtual_user_schedules (enabled, next_run_at, persona);

CREATE TABLE flowstate_virtual_user_runs (
    id             TEXT    NOT NULL PRIMARY KEY,
    persona        TEXT    NOT NULL,
    status         TEXT    NOT NULL,
    findings       TEXT    CHECK (json_valid(findings)),
    failure        TEXT,
    transcript_len INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
) STRICT;

-- A persona's runs newest first (the tick reads the latest one).
CREATE INDEX flowstate_virtual_user_runs_persona_created ON flowstate_virtual_user_runs (persona, created_at, id);
CREATE INDEX flowstate_virtual_user_runs_status_created ON flowstate_virtual_user_runs (status, created_at, id);
-- The unfiltered listing, newest first, walks this one backwards.
CREATE INDEX flowstate_virtual_user_runs_created ON flowstate_virtual_user_runs (created_at, id);

CREATE TABLE flowstate_virtual_user_transcript (
    run_id TEXT    NOT NULL REFERENCES flowstate_virtual_user_runs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    entry  TEXT    NOT NULL CHECK (json_valid(entry)),
    at     INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT;
