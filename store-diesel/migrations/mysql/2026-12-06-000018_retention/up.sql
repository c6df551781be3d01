-- Retention (issue 31): a prune of runs walks the settled runs, the
-- longest settled first, and stops at its batch. MySQL has no partial
-- index, and over `status IN (...)` it reads every settled run before the
-- cutoff and sorts them (MariaDB chose the lease-expiry index and sorted
-- 24,912 rows for a batch of 500 over 50,000 runs). As for the claim's
-- `leasable` (migration 000007): a virtual column, 1 for the settled
-- statuses (retention::prunable_run_statuses()) and NULL otherwise, that
-- only the prune's pick names, and an index that leads with it. One ALTER,
-- so it applies whole.
ALTER TABLE flowstate_runs
    ADD COLUMN settled TINYINT
        AS (CASE WHEN status IN ('completed', 'failed', 'cancelled') THEN 1 END) VIRTUAL,
    ADD INDEX flowstate_runs_settled (settled, updated_at, id);
