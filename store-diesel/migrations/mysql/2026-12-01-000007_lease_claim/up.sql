-- The run claim (RunLeaseStore::claim_run/claim_runs) takes the runnable
-- runs oldest first, the ones with a cancel requested first. Its pick reads
-- `status IN ('running', 'suspended')` ordered by `(created_at, id)`: two
-- ranges of `flowstate_runs_status_created`, which MySQL merges with a sort
-- of every unsettled run on every claim. As for the batch claim's steps,
-- the leasable statuses (lease::leasable_statuses()) get a virtual column,
-- 1 or NULL, that only the claim's pick names, and an index that leads with
-- it and the cancel flag the pick filters by, so the pick walks the oldest
-- runs in order and stops at its limit. One ALTER, so it applies whole.
ALTER TABLE flowstate_runs
    ADD COLUMN leasable TINYINT
        AS (CASE WHEN status IN ('running', 'suspended') THEN 1 END) VIRTUAL,
    ADD INDEX flowstate_runs_leasable (leasable, cancel_requested, created_at, id);
