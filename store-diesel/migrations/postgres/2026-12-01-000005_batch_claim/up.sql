-- The batch claim (BatchStepStore::claim_batch) walks the claimable steps
-- oldest first: a partial index over the only statuses it takes, so a
-- table of mostly finished steps costs it nothing. The second serves the
-- claim filtered by function.
CREATE INDEX flowstate_steps_claimable_idx ON flowstate_steps (created_at, id)
    WHERE status IN ('pending', 'failed');
CREATE INDEX flowstate_steps_claimable_function_idx ON flowstate_steps (function_name, created_at, id)
    WHERE status IN ('pending', 'failed');
