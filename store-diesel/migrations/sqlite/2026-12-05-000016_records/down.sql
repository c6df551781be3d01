ALTER TABLE flowstate_virtual_user_schedules DROP COLUMN budget_max_spend;
ALTER TABLE flowstate_virtual_user_schedules DROP COLUMN budget_max_turns;
ALTER TABLE flowstate_virtual_user_schedules DROP COLUMN budget_max_duration_ms;
ALTER TABLE flowstate_virtual_user_schedules DROP COLUMN goals;
ALTER TABLE flowstate_virtual_user_schedules DROP COLUMN last_run_at;
ALTER TABLE flowstate_workflow_versions DROP COLUMN status;
ALTER TABLE flowstate_workflow_versions DROP COLUMN source;
ALTER TABLE flowstate_runs DROP COLUMN output;
