ALTER TABLE flowstate_virtual_user_schedules DROP COLUMN budget_max_spend, DROP COLUMN budget_max_turns, DROP COLUMN budget_max_duration_ms, DROP COLUMN goals, DROP COLUMN last_run_at;
ALTER TABLE flowstate_workflow_versions DROP COLUMN status, DROP COLUMN source;
ALTER TABLE flowstate_runs DROP COLUMN output;
