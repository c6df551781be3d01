-- Virtual users on PostgreSQL (see store-diesel/SCHEMA.md): personas'
-- schedules, their runs, and the runs' transcripts. Same conventions as
-- the initial schema: TEXT COLLATE "C", BIGINT microseconds, jsonb.

CREATE TABLE flowstate_virtual_user_schedules (
    persona         TEXT COLLATE "C" PRIMARY KEY,
    enabled         BOOLEAN NOT NULL,
    min_interval_ms BIGINT NOT NULL,
    max_interval_ms BIGINT NOT NULL,
    next_run_at     BIGINT NOT NULL,
    last_run_id     TEXT COLLATE "C",
    updated_at      BIGINT NOT NULL
);
-- The due listing: enabled AND next_run_at <= now, earliest first.
CREATE INDEX flowstate_virtual_user_schedules_due_idx
    ON flowstate_virtual_user_schedules (enabled, next_run_at, persona);

CREATE TABLE flowstate_virtual_user_runs (
    id             TEXT COLLATE "C" PRIMARY KEY,
    persona        TEXT COLLATE "C" NOT NULL,
    status         TEXT COLLATE "C" NOT NULL,
    findings       JSONB,
    failure        TEXT,
    transcript_len BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);
-- A persona's runs newest first (the tick reads the latest one).
CREATE INDEX flowstate_virtual_user_runs_persona_created_idx
    ON flowstate_virtual_user_runs (persona, created_at, id);
CREATE INDEX flowstate_virtual_user_runs_status_created_idx
    ON flowstate_virtual_user_runs (status, created_at, id);
-- The unfiltered listing, newest first, walks this one backwards.
CREATE INDEX flowstate_virtual_user_runs_created_idx
    ON flowstate_virtual_user_runs (created_at, id);

CREATE TABLE flowstate_virtual_user_transcript (
    run_id TEXT COLLATE "C" NOT NULL REFERENCES flowstate_virtual_user_runs (id) ON DELETE CASCADE,
    seq    BIGINT NOT NULL,
    entry  JSONB NOT NULL,
    at     BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
