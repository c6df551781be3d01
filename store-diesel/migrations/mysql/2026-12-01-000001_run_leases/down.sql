DROP TABLE IF EXISTS flowstate_effects;
DROP TABLE IF EXISTS flowstate_run_signals;
ALTER TABLE flowstate_runs
    DROP COLUMN lease_owner,
    DROP COLUMN lease_token,
    DROP COLUMN lease_expires_at,
    DROP COLUMN failures,
    DROP COLUMN failure_reason,
    DROP COLUMN cancel_requested,
    DROP COLUMN wake_at,
    DROP COLUMN waiting_on;
