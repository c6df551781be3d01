-- The recovery sweeps (RecoveryStore, RunRecoveryStore), each answered
-- from an index, so a table of settled runs costs them nothing. The relay's
-- undispatched steps need none of their own: they are pending or failed,
-- and `flowstate_steps_claimable` (the batch claim's) holds exactly those,
-- oldest first.
--
-- The stalled sweep walks the running runs least recently moved first.
-- The index is partial, like PostgreSQL's, but leads with `status`:
-- SQLite's planner, without statistics, takes an equality on `status` over
-- a range, so an index on `(updated_at, id)` alone loses to
-- `flowstate_runs_status_created` and a sort of every running run. Led by
-- `status`, the partial index offers the equality too and wins.
CREATE INDEX flowstate_runs_running_updated_idx ON flowstate_runs (status, updated_at, id)
    WHERE status = 'running';
-- The reaper walks the leases held, first expired first: a run without
-- one (every settled run a holder finished, and every reaped one) is not
-- in it.
CREATE INDEX flowstate_runs_lease_expiry_idx ON flowstate_runs (lease_expires_at, id)
    WHERE lease_expires_at IS NOT NULL;
