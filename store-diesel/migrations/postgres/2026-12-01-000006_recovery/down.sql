DROP INDEX IF EXISTS flowstate_runs_lease_expiry_idx;
DROP INDEX IF EXISTS flowstate_runs_running_updated_idx;
