ALTER TABLE flowstate_runs
    DROP INDEX flowstate_runs_leasable,
    ADD INDEX flowstate_runs_leasable (leasable, cancel_requested, created_at, id);
