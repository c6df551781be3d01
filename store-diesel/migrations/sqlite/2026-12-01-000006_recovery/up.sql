-- The recovery sweeps (RecoveryStore, RunRecoveryStore), each answered
-- from an index, so a table of settled runs costs them nothing. The relay's
-- undispatched steps need none of their own: they are pending or failed,
-- and `flowstate_steps_claimable` (the batch claim's) holds exactly those,
-- oldest first.
--
-- Both indexes are partial, like PostgreSQL's, but lead with `status`:
-- SQLite's planner, without statistics, takes an equality on `status` over
-- a range, so an index on `(updated_at, id)` alone loses to
-- `flowstate_runs_status_created` and a sort of every running run. Led by
-- `status`, the partial index offers the equality too and wins.
--
-- The stalled sweep walks the running runs least recently moved first.
CREATE INDEX flowstate_runs_running_updated_idx ON flowstate_runs (status, updated_at, id)
    WHERE status = 'running';
-- The reaper reads the expired leases of unsettled runs (a run without a
-- lease is not in it) and sorts only those, first expired first: its two
-- statuses are two ranges of this index.
CREATE INDEX flowstate_runs_lease_expiry_idx ON flowstate_runs (status, lease_expires_at, id)
    WHERE status IN ('running', 'suspended') AND lease_expires_at IS NOT NULL;
