ALTER TABLE flowstate_runs
    DROP INDEX flowstate_runs_leasable,
    DROP COLUMN sleep_until,
    ADD INDEX flowstate_runs_leasable (leasable, cancel_requested, lease_expires_at, created_at, id);
