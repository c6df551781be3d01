-- The records an engine needs (issue 30; SCHEMA.md, "Records"). Every
-- column is nullable or defaulted, so every row already stored stays valid
-- and reads as before.
--
-- JSON columns are LONGTEXT utf8mb4_bin, what MariaDB's JSON is, without
-- the json_valid CHECK MariaDB would add (it refuses 32 levels of nesting,
-- under core's 64; migration 000015). core checks every value before it is
-- written and a row that does not decode is a typed Corrupt on read.

-- What a run answered its caller: written with its status
-- (`set_run_status_with_output`, `finish_with_output`), NULL until then.
ALTER TABLE flowstate_runs
    ADD COLUMN output LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;

-- A version's source (what it was built from; LONGTEXT, as long as any
-- value the limits allow) and status (draft, active, declined;
-- `VersionStatus`). Every version stored before was stored directly, so it
-- is active.
ALTER TABLE flowstate_workflow_versions
    ADD COLUMN source LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'active';

-- A schedule's last start (set by the claim that records a run), goals (a
-- JSON array of strings, NULL for none) and budget (each limit NULL for
-- none): `ScheduleStore::update_schedule` writes them, `upsert_schedule`
-- keeps them.
ALTER TABLE flowstate_virtual_user_schedules
    ADD COLUMN last_run_at BIGINT NULL,
    ADD COLUMN goals LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN budget_max_duration_ms BIGINT NULL,
    ADD COLUMN budget_max_turns BIGINT NULL,
    ADD COLUMN budget_max_spend BIGINT NULL;
