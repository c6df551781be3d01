-- The run claim reads no sleeping run, as on PostgreSQL (see its up.sql
-- and SCHEMA.md, "The run claim reads no held run"): the free runs that
-- do not sleep from `flowstate_runs_free_idx`, the sleeping ones whose
-- time has come from `flowstate_runs_sleeping_idx`, by the time they
-- wake. A run asleep was in the free index, and each claim read past
-- every one of them while it held the one writer.
DROP INDEX flowstate_runs_free_idx;
CREATE INDEX flowstate_runs_free_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND cancel_requested = 0
      AND lease_expires_at IS NULL AND (wake_at IS NULL OR waiting_on IS NOT NULL);
CREATE INDEX flowstate_runs_sleeping_idx ON flowstate_runs (wake_at, id)
    WHERE status IN ('running', 'suspended') AND cancel_requested = 0
      AND lease_expires_at IS NULL AND wake_at IS NOT NULL AND waiting_on IS NULL;
