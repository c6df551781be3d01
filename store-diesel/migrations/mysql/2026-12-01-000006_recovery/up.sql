-- The recovery sweeps (RecoveryStore, RunRecoveryStore), each answered
-- from an index. MySQL has no partial index, so:
-- - the stalled sweep reads `(status, updated_at, id)` for the running runs,
--   least recently moved first (the settled runs are other `status` values
--   and never read);
-- - the reaper reads `(lease_expires_at, id)`, first expired first: a NULL
--   expiry (no lease held: every settled run a holder finished, every
--   reaped one) sorts first and is outside the `<=` range it scans.
-- The relay's undispatched steps need none of their own: they lead with the
-- batch claim's `claimable` column (`flowstate_steps_claimable`).
-- One ALTER, so it applies whole.
ALTER TABLE flowstate_runs
    ADD INDEX flowstate_runs_status_updated (status, updated_at, id),
    ADD INDEX flowstate_runs_lease_expiry (lease_expires_at, id);
