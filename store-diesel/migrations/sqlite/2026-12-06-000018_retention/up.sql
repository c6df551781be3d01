-- Retention (issue 31): a prune of runs walks the settled runs, the
-- longest settled first, and stops at its batch. The prune's query states
-- the same `status IN (...)` term, so SQLite's planner takes this partial
-- index.
CREATE INDEX IF NOT EXISTS flowstate_runs_settled_idx
    ON flowstate_runs (updated_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled');
