-- The run claim reads no sleeping run (SCHEMA.md, "The run claim reads no
-- held run"). A run asleep (`wake_at` set, waiting on nothing else) sat
-- among the free runs of `flowstate_runs_leasable`, and the claim's
-- `FOR UPDATE SKIP LOCKED` read and locked every one of them older than
-- the first run it could take: a sleep ends with time, not with a write.
-- MySQL has no partial index, so a virtual column holds the time a
-- sleeping run wakes (NULL for any other run) and goes into the index
-- after the lease's end: free runs that do not sleep are a ref on four
-- key parts (`lease_expires_at IS NULL AND sleep_until IS NULL`) in
-- creation order, sleeping runs whose time has come a range that ends at
-- the clock, run-out leases (never asleep: a claim clears the wait) the
-- range on the lease's end as before. One ALTER, so it applies whole.
ALTER TABLE flowstate_runs
    ADD COLUMN sleep_until BIGINT
        AS (CASE WHEN waiting_on IS NULL THEN wake_at END) VIRTUAL,
    DROP INDEX flowstate_runs_leasable,
    ADD INDEX flowstate_runs_leasable
        (leasable, cancel_requested, lease_expires_at, sleep_until, created_at, id);
