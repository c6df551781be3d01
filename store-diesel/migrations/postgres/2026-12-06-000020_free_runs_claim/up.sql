-- The run claim reads free runs and run-out leases apart (SCHEMA.md,
-- "The run claim reads no held run"). `flowstate_runs_claimable_idx` held
-- every unsettled run, held or not, and a lease runs out with time, not
-- with a write, so no index could leave a held run out of it: every claim
-- read past all the runs held before the first free one (100,000 held
-- runs: 100,000 rows removed by its filter, 0.016x the claim rate at a
-- backlog of 1,000,000). Now:
-- - free runs (no lease) from `flowstate_runs_free_idx`, oldest first; a
--   claim or a release moves a run out of it or into it;
-- - run-out leases from `flowstate_runs_lease_expiry_idx` (000006), first
--   run out first, a range that ends at the clock.
-- A held run is in neither range.
DROP INDEX flowstate_runs_claimable_idx;
CREATE INDEX flowstate_runs_free_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND NOT cancel_requested
      AND lease_expires_at IS NULL;
