DROP INDEX flowstate_runs_wake_idx;
