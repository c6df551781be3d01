ALTER TABLE flowstate_runs
    DROP INDEX flowstate_runs_lease_expiry,
    DROP INDEX flowstate_runs_status_updated;
