DROP INDEX flowstate_runs_wake_at ON flowstate_runs;
