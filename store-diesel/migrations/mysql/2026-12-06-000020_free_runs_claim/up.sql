-- The run claim reads free runs and run-out leases apart (SCHEMA.md,
-- "The run claim reads no held run"). `flowstate_runs_leasable` led with
-- the leasable flag and the cancel flag, then `created_at`: a held run sat
-- among the free ones, and the claim's `FOR UPDATE SKIP LOCKED` read and
-- locked every held run before the first free one (1,000,000 held runs
-- filled the buffer pool with lock heaps and InnoDB aborted the server).
-- MySQL has no partial index, so the lease's end goes into this one,
-- before `created_at`: free runs (`lease_expires_at IS NULL`, a ref on
-- three key parts) come in creation order, run-out leases
-- (`lease_expires_at <= now`) in a range that ends at the clock, and a
-- held run is in neither. One ALTER, so it applies whole.
ALTER TABLE flowstate_runs
    DROP INDEX flowstate_runs_leasable,
    ADD INDEX flowstate_runs_leasable (leasable, cancel_requested, lease_expires_at, created_at, id);
