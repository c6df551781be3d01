DROP INDEX flowstate_runs_cancel_requested_idx;
DROP INDEX flowstate_runs_claimable_idx;
ALTER TABLE flowstate_runs DROP COLUMN cancel_requested;
ALTER TABLE flowstate_runs DROP COLUMN failure_reason;
ALTER TABLE flowstate_runs DROP COLUMN failures;
ALTER TABLE flowstate_runs DROP COLUMN lease_expires_at;
ALTER TABLE flowstate_runs DROP COLUMN lease_token;
ALTER TABLE flowstate_runs DROP COLUMN lease_owner;
