-- Run leases (see SCHEMA.md): who holds a run, until when on the database's
-- clock, the fencing token of the last claim, consecutive failures and the
-- last reason, and a pending cancel request.
--
-- One ALTER TABLE: InnoDB applies it whole or not at all, so a failed run
-- of this file leaves nothing half-done to trip over when it runs again.
-- MySQL has no partial index: the claim scans `flowstate_runs_status_created`
-- for the unsettled statuses, which a mostly-settled table keeps short.
ALTER TABLE flowstate_runs
    ADD COLUMN lease_owner VARBINARY(255) NULL,
    ADD COLUMN lease_token BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires_at BIGINT NULL,
    ADD COLUMN failures BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN failure_reason LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    ADD COLUMN cancel_requested BOOLEAN NOT NULL DEFAULT FALSE;
