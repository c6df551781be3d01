ALTER TABLE flowstate_runs
    DROP INDEX flowstate_runs_leasable,
    DROP COLUMN leasable;
