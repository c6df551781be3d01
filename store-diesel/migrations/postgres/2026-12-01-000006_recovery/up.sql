-- The recovery sweeps (RecoveryStore, RunRecoveryStore), each answered
-- from an index, so a table of settled runs costs them nothing. The relay's
-- undispatched steps need none of their own: they are pending or failed,
-- and `flowstate_steps_claimable_idx` (the batch claim's) holds exactly
-- those, oldest first.
--
-- The stalled sweep walks the running runs least recently moved first.
CREATE INDEX flowstate_runs_running_updated_idx ON flowstate_runs (updated_at, id)
    WHERE status = 'running';
-- The reaper walks the leases held, first expired first: a run without
-- one (every settled run a holder finished, and every reaped one) is not
-- in it.
CREATE INDEX flowstate_runs_lease_expiry_idx ON flowstate_runs (lease_expires_at, id)
    WHERE lease_expires_at IS NOT NULL;
