-- The run claim reads free runs and run-out leases apart, as on
-- PostgreSQL (see its up.sql and SCHEMA.md, "The run claim reads no held
-- run"): free runs from `flowstate_runs_free_idx`, run-out leases from
-- `flowstate_runs_lease_expiry_idx` (000006). A held run is in neither
-- range; the old claim index held every unsettled run and the claim read
-- past all the held ones (and held the one writer while it did).
DROP INDEX flowstate_runs_claimable_idx;
CREATE INDEX flowstate_runs_free_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND cancel_requested = 0
      AND lease_expires_at IS NULL;
