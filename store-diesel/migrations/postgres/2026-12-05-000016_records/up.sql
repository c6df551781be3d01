-- The records an engine needs (issue 30; SCHEMA.md, "Records"). Every
-- column is nullable or defaulted, so every row already stored stays valid
-- and reads as before.

-- What a run answered its caller: written with its status
-- (`set_run_status_with_output`, `finish_with_output`), NULL until then.
ALTER TABLE flowstate_runs ADD COLUMN output JSONB;

-- A version's source (what it was built from) and status (draft, active,
-- declined; `VersionStatus`). Every version stored before was stored
-- directly, so it is active.
ALTER TABLE flowstate_workflow_versions
    ADD COLUMN source TEXT,
    ADD COLUMN status TEXT COLLATE "C" NOT NULL DEFAULT 'active';

-- A schedule's last start (set by the claim that records a run), goals (a
-- JSON array of strings, NULL for none) and budget (each limit NULL for
-- none): `ScheduleStore::update_schedule` writes them, `upsert_schedule`
-- keeps them.
ALTER TABLE flowstate_virtual_user_schedules
    ADD COLUMN last_run_at BIGINT,
    ADD COLUMN goals JSONB,
    ADD COLUMN budget_max_duration_ms BIGINT,
    ADD COLUMN budget_max_turns BIGINT,
    ADD COLUMN budget_max_spend BIGINT;
