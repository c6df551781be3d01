-- Retention (issue 31): a prune of runs walks the settled runs, the
-- longest settled first, and stops at its batch. The index holds only
-- settled runs, so the live runs' claims and sweeps never pay for it, and
-- a prune never reads a live run to skip it.
CREATE INDEX IF NOT EXISTS flowstate_runs_settled_idx
    ON flowstate_runs (updated_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled');
