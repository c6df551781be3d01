DROP INDEX flowstate_runs_sleeping_idx;
DROP INDEX flowstate_runs_free_idx;
CREATE INDEX flowstate_runs_free_idx ON flowstate_runs (created_at, id)
    WHERE status IN ('running', 'suspended') AND NOT cancel_requested
      AND lease_expires_at IS NULL;
