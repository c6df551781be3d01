DROP INDEX IF EXISTS flowstate_runs_settled_idx;
