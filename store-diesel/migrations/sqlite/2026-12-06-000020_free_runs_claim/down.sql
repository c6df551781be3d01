DROP INDEX flowstate_runs_free_idx;
CREATE INDEX flowstate_runs_claimable_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND cancel_requested = 0;
