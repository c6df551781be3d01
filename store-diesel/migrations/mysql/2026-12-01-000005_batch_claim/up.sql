-- The batch claim (BatchStepStore::claim_batch) walks the claimable steps
-- by status, oldest first (MySQL has no partial indexes). The second
-- serves the claim filtered by function.
CREATE INDEX flowstate_steps_claimable ON flowstate_steps (status, created_at, id);
CREATE INDEX flowstate_steps_claimable_function ON flowstate_steps (function_name, status, created_at, id);
