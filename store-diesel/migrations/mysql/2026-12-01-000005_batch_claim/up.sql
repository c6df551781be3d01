-- The batch claim (BatchStepStore::claim_batch) walks the claimable steps
-- oldest first. MySQL has no partial indexes, and an index led by `status`
-- would be one the optimizer picks for the single-step guarded UPDATEs
-- (`WHERE id = ? AND status IN (...)`) when few rows hold that status,
-- instead of the primary key. So the claimable statuses get a virtual
-- column of their own, 1 or NULL, and the indexes lead with it: only the
-- batch claim's pick names it. Its statuses are BatchClaim::statuses()
-- (core tests that they are these two). One ALTER, so it applies whole.
ALTER TABLE flowstate_steps
    ADD COLUMN claimable TINYINT
        AS (CASE WHEN status IN ('pending', 'failed') THEN 1 END) VIRTUAL,
    ADD INDEX flowstate_steps_claimable (claimable, created_at, id),
    ADD INDEX flowstate_steps_claimable_function (claimable, function_name, created_at, id);
